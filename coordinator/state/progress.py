"""What the learner last reported: iteration, transitions trained, losses (shown in status and curves), and the
learner hooks that failed during the run. Persisted under the meta key `learner`."""

from __future__ import annotations

from typing import Any, ClassVar

from rlfleet.coordinator.journal.component import Pending, Stored, Table
from rlfleet.shared.wire import LearnReport


class LearnerProgress:
    key: ClassVar[str] = "learner"
    tables: ClassVar[tuple[Table, ...]] = ()

    def __init__(self) -> None:
        self.pending = Pending()
        self.iteration = 0
        self.transitions_trained = 0
        self.losses: dict[str, float] = {}
        self.hooks_failed: dict[str, str] = {}

    def report(self, report: LearnReport) -> None:
        self.iteration = report.iteration
        self.transitions_trained = report.transitions_trained
        self.losses = dict(report.losses)  # the wire refuses NaN and inf
        # Kept for the whole run with each hook's first error: a restarted learner reports none until they fail.
        self.hooks_failed = {**report.hooks_failed, **self.hooks_failed}
        self.pending.mark()

    def published(self, iteration: int) -> None:
        """A policy published at `iteration`: the iteration shown never goes back."""
        self.iteration = max(self.iteration, iteration)
        self.pending.mark()

    def state_dict(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "transitions_trained": self.transitions_trained, "losses": self.losses,
                "hooks_failed": self.hooks_failed}

    def load_state_dict(self, stored: Stored, now: float) -> None:
        state = stored.meta
        self.iteration, self.transitions_trained = int(state["iteration"]), int(state["transitions_trained"])
        self.losses = dict(state["losses"])
        self.hooks_failed = dict(state.get("hooks_failed", {}))  # journals written before hooks existed lack it
