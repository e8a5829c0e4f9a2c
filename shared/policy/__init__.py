"""Published policies: the manifest, the policy files, the networks and actors built from them, and the flat
parameter vectors and noise table of population-based learners.
"""
