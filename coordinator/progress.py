"""What the learner last reported: iteration, transitions trained, losses (shown in status and curves)."""

from __future__ import annotations

from typing import Any

from shared.wire import LearnReport


class LearnerProgress:
    def __init__(self) -> None:
        self.iteration = 0
        self.transitions_trained = 0
        self.losses: dict[str, float] = {}

    def report(self, report: LearnReport) -> None:
        self.iteration = report.iteration
        self.transitions_trained = report.transitions_trained
        self.losses = dict(report.losses)  # the wire refuses NaN and inf

    def state_dict(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "transitions_trained": self.transitions_trained, "losses": self.losses}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.iteration, self.transitions_trained = int(state["iteration"]), int(state["transitions_trained"])
        self.losses = dict(state["losses"])
