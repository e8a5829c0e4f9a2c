"""The run's lifecycle: running until solved, out of budget, stopped; wall-clock time across restarts.

Persisted under the meta key `lifecycle`, with the time elapsed so far: every budget check marks it changed, so
a restarted coordinator loses at most the time since the last commit.

`committed_state` is the state known durable: the one workers are told of. An end (or a reopening) becomes
`state` at once, so the operation that made it sees it, but reaches workers only once the commit that holds it
is durable (`mark_committed`): a worker told `solved` exits for good, and if that commit failed and the run
rolled back to running, nobody would be left to train it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from coordinator.journal.component import Pending, Stored, Table
from shared.config.run_config import BudgetConfig
from shared.wire import RunState


class Lifecycle:
    key: ClassVar[str] = "lifecycle"
    tables: ClassVar[tuple[Table, ...]] = ()

    def __init__(self, budget: BudgetConfig, clock: Callable[[], float]) -> None:
        self.budget = budget
        self.clock = clock
        self.pending = Pending()
        self.started = clock()
        self.ended: float | None = None
        self.state: RunState = "running"
        self.committed_state: RunState = "running"
        self.message = "training"
        self.resumes = 0

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def committed_running(self) -> bool:
        return self.committed_state == "running"

    def mark_committed(self, state: RunState) -> bool:
        """`state` is durable; True if workers now have a different state to be told (the caller wakes them).
        A state this component no longer holds (rebuilt from the journal meanwhile) is left alone."""
        if state != self.state or state == self.committed_state:
            return False
        self.committed_state = state
        return True

    def end(self, state: RunState, message: str, now: float) -> bool:
        """End a running run; False if it had already ended (the first reason stands)."""
        if self.state != "running":
            return False
        self.state, self.message, self.ended = state, message, now
        self.pending.mark()
        return True

    def resumed(self, reopen: bool) -> bool:
        """Count a coordinator restart; with `reopen`, a stopped run continues. True if it was reopened."""
        self.resumes += 1
        self.pending.mark()
        return reopen and self.reopen(self.clock())

    def reopen(self, now: float) -> bool:
        """Continue a stopped run (not a solved or exhausted one); the time it spent stopped does not count
        against the wall-clock budget. False if the run was not stopped."""
        if self.state != "stopped" or self.ended is None:
            return False
        self.started = now - (self.ended - self.started)
        self.state, self.message, self.ended = "running", "training (resumed after a stop)", None
        self.pending.mark()
        return True

    def check_budget(self, env_steps: int, now: float) -> bool:
        """End the run if a budget is used up (True then). Time has passed either way: the elapsed time is
        journalled with the operation's commit."""
        self.pending.mark()
        if env_steps >= self.budget.max_env_steps:
            return self.end("budget_exhausted", f"env-step budget of {self.budget.max_env_steps} used up", now)
        if now - self.started >= self.budget.max_wall_seconds:
            return self.end("budget_exhausted", f"wall-clock budget of {self.budget.max_wall_seconds:g}s used up",
                            now)
        return False

    def wall_seconds(self, now: float) -> float:
        return (self.ended if self.ended is not None else now) - self.started

    def state_dict(self) -> dict[str, Any]:
        return {"state": self.state, "message": self.message, "elapsed": self.clock() - self.started,
                "ended_elapsed": None if self.ended is None else self.ended - self.started, "resumes": self.resumes}

    def load_state_dict(self, stored: Stored, now: float) -> None:
        state = stored.meta
        self.started = now - float(state["elapsed"])
        self.ended = None if state["ended_elapsed"] is None else self.started + float(state["ended_elapsed"])
        self.state, self.message = state["state"], state["message"]
        self.committed_state = self.state  # read back from the journal: durable
        self.resumes = int(state["resumes"])
