"""The run's lifecycle: running until solved, out of budget, stopped; wall-clock time across restarts."""

from __future__ import annotations

from typing import Any

from shared.config.run_config import BudgetConfig
from shared.wire import RunState


class Lifecycle:
    def __init__(self, budget: BudgetConfig, now: float) -> None:
        self.budget = budget
        self.started = now
        self.ended: float | None = None
        self.state: RunState = "running"
        self.message = "training"
        self.resumes = 0

    @property
    def running(self) -> bool:
        return self.state == "running"

    def end(self, state: RunState, message: str, now: float) -> bool:
        """End a running run; False if it had already ended (the first reason stands)."""
        if self.state != "running":
            return False
        self.state, self.message, self.ended = state, message, now
        return True

    def reopen(self, now: float) -> bool:
        """Continue a stopped run (not a solved or exhausted one); the time it spent stopped does not count
        against the wall-clock budget. False if the run was not stopped."""
        if self.state != "stopped" or self.ended is None:
            return False
        self.started = now - (self.ended - self.started)
        self.state, self.message, self.ended = "running", "training (resumed after a stop)", None
        return True

    def check_budget(self, env_steps: int, now: float) -> bool:
        if env_steps >= self.budget.max_env_steps:
            return self.end("budget_exhausted", f"env-step budget of {self.budget.max_env_steps} used up", now)
        if now - self.started >= self.budget.max_wall_seconds:
            return self.end("budget_exhausted", f"wall-clock budget of {self.budget.max_wall_seconds:g}s used up",
                            now)
        return False

    def wall_seconds(self, now: float) -> float:
        return (self.ended if self.ended is not None else now) - self.started

    def state_dict(self, now: float) -> dict[str, Any]:
        return {"state": self.state, "message": self.message, "elapsed": now - self.started,
                "ended_elapsed": None if self.ended is None else self.ended - self.started, "resumes": self.resumes}

    def load_state_dict(self, state: dict[str, Any], now: float) -> None:
        self.started = now - float(state["elapsed"])
        self.ended = None if state["ended_elapsed"] is None else self.started + float(state["ended_elapsed"])
        self.state, self.message = state["state"], state["message"]
        self.resumes = int(state["resumes"])
