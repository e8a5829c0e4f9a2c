"""Waiting for another thread's work to show, with a bound: a test that hangs says nothing, one that fails says what
it waited for."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], object], timeout: float = 10.0) -> None:
    """Poll `condition` every 10 ms until it holds; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)
