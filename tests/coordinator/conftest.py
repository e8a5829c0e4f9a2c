"""The Run fixtures of test_run.py, shared with the other coordinator unit tests."""

from tests.coordinator.test_run import clock, make_run, run  # noqa: F401
