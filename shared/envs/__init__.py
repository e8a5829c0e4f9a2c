"""Environments as every service builds them: the env section's wrappers, gymnasium's spaces as rlfleet's, env seeds,
and the two-player games with their self-play opponents.
"""
