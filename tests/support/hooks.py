"""Learner hooks for tests, reached as `tests.support.hooks:<name>` the way a user's own module would be.

`record` appends every view it sees as a JSON line to the file named by $HOOK_TEST_LOG (an environment
variable: `rlfleet up` hands it to the learner it starts); `boom` raises every time it is called; `tamper`
tries to change what it was given; `slow` makes each update as slow as a CNN's on pixels (3 s)."""

from __future__ import annotations

import dataclasses
import json
import os
import time

from rlfleet.shared.config.hooks import HookView

LOG_VARIABLE = "HOOK_TEST_LOG"
SLOW_SECONDS = 3.0  # above the 2 s a force_sync collector used to wait for a newer policy


def record(view: HookView) -> None:
    line = json.dumps(dataclasses.asdict(view))
    with open(os.environ[LOG_VARIABLE], "a") as log:
        log.write(line + "\n")


def slow(view: HookView) -> None:
    time.sleep(SLOW_SECONDS)


def boom(view: HookView) -> None:
    raise ValueError(f"boom at {view.event} {view.iteration}")


def tamper(view: HookView) -> None:
    view.losses.clear()  # type: ignore[attr-defined]  # its own copy: nothing else changes


def no_arguments() -> None:
    """Not a hook: a hook takes the view."""
