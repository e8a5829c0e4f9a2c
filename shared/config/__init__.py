"""The run configuration: its sections' models and their checks, and the preflight that builds the env and loads
the hooks (in child processes) before a run starts (shared/config/preflight.py).

Validation is pure, with no env built and no process started, because configs are validated everywhere: every
claimed task carries parts of one, and the coordinator validates live setting changes and stored configs. The
checks with effects run once, in the preflight, where a run is about to start.
"""
