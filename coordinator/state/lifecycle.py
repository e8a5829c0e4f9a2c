"""The run's lifecycle: running until solved, out of budget, stopped; wall-clock time across restarts.

A stopped run resumed by name trains on (`reopen`); so does one that ran out of budget, when it is resumed with a
larger one (`extend`: `rlfleet up --resume NAME --set budget.max_wall_seconds=...`).

A run with no threshold does not end the moment its budget is used up: it stops training (`training` turns
False, collectors and learners are told the budget is exhausted) and stays running while its best policy's
held-out test plays (coordinator/operations/budget.py), then ends budget_exhausted. So does a run with a threshold
whose candidate's test is under way when the budget runs out, until that test solves the run or does not. `final`
keeps the budget's reason meanwhile.

Persisted under the meta key `lifecycle`, with the time elapsed so far: every budget check marks it changed, so
a restarted coordinator loses at most the time since the last commit.

`committed_state` (and `committed_final`) is the state known durable: the one workers are told of. An end (or a
reopening) becomes `state` at once, so the operation that made it sees it, but reaches workers only once the
commit that holds it is durable (`mark_committed`): a worker told `solved` exits for good, and if that commit
failed and the run rolled back to running, nobody would be left to train it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rlfleet.coordinator.journal.component import Pending, Stored, Table
from rlfleet.shared.config.run_config import BudgetConfig
from rlfleet.shared.wire import RunState


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
        self.final: str | None = None  # the budget used up, while the run waits for its end-of-budget test
        self.committed_final: str | None = None  # `final` known durable: collectors and learners are told of it

    @property
    def training(self) -> bool:
        """Collectors collect and learners learn: the run is running and its budget is not used up."""
        return self.state == "running" and self.final is None

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def committed_running(self) -> bool:
        return self.committed_state == "running"

    def mark_committed(self, state: RunState, final: str | None = None) -> bool:
        """`state` and `final` are durable; True if workers now have something new to be told (the caller wakes
        them). What this component no longer holds (rebuilt from the journal meanwhile) is left alone."""
        if (state, final) != (self.state, self.final):
            return False
        if (state, final) == (self.committed_state, self.committed_final):
            return False
        self.committed_state, self.committed_final = state, final
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

    def extend(self, env_steps: int, now: float) -> bool:
        """The budget was raised on a resume (this component was built with the new one): a run that ended on its
        budget, or stopped training for it and waits for its end-of-budget test, trains on while the new budget
        leaves room. The time it spent ended does not count against the wall-clock budget, as for a stop. True if
        it trains again; a solved, stopped or failed run, or one the new budget does not free, is left as it is."""
        if self.state == "budget_exhausted" and self.ended is not None:
            elapsed = self.ended - self.started
        elif self.state == "running" and self.final is not None:
            elapsed = now - self.started
        else:
            return False
        if env_steps >= self.budget.max_env_steps or elapsed >= self.budget.max_wall_seconds:
            return False
        self.started = now - elapsed
        self.state, self.ended, self.final = "running", None, None
        self.message = "training (resumed with a larger budget)"
        self.pending.mark()
        return True

    def budget_used(self, env_steps: int, now: float) -> str | None:
        """Why training must stop (a budget is used up), or None while the run trains. Time has passed either way:
        the elapsed time is journalled with the operation's commit."""
        self.pending.mark()
        if not self.training:
            return None
        if env_steps >= self.budget.max_env_steps:
            return f"env-step budget of {self.budget.max_env_steps} used up"
        if now - self.started >= self.budget.max_wall_seconds:
            return f"wall-clock budget of {self.budget.max_wall_seconds:g}s used up"
        return None

    def finish(self, reason: str, waiting: str) -> None:
        """Stop training for `reason` (a budget used up) but keep the run running until its last test reports;
        `waiting` says for what."""
        self.final, self.message = reason, f"{reason}; {waiting}"
        self.pending.mark()

    def wall_seconds(self, now: float) -> float:
        return (self.ended if self.ended is not None else now) - self.started

    def state_dict(self) -> dict[str, Any]:
        return {"state": self.state, "message": self.message, "elapsed": self.clock() - self.started,
                "ended_elapsed": None if self.ended is None else self.ended - self.started, "resumes": self.resumes,
                "final": self.final}

    def load_state_dict(self, stored: Stored, now: float) -> None:
        state = stored.meta
        self.started = now - float(state["elapsed"])
        self.ended = None if state["ended_elapsed"] is None else self.started + float(state["ended_elapsed"])
        self.state, self.message = state["state"], state["message"]
        self.committed_state = self.state  # read back from the journal: durable
        self.resumes = int(state["resumes"])
        self.final = state.get("final")  # journals from before runs without a threshold hold none
        self.committed_final = self.final
