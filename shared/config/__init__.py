"""The run configuration: its models (pure validation, no side effects) and the preflight that builds the env and
loads the hooks in a child process before a run starts (shared/config/preflight.py).
"""
