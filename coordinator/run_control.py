"""The control plane's operations on a run (coordinator/control.py holds its state and rules)."""

from __future__ import annotations

import dataclasses
from typing import Any

from coordinator.errors import Conflict
from coordinator.run_core import RunCore
from shared.config.run_config import RunConfig
from shared.wire import ControlStatus


class RunControl(RunCore):
    @property
    def max_wait_seconds(self) -> float:
        """The longest long-poll: half a lease, so a waiting worker always renews in time."""
        return self.fleet.lease_seconds / 2

    def _controlled(self, *parts: str) -> ControlStatus:
        self._commit([], "control", *parts)
        return self.control.status()

    def _running(self, what: str) -> None:
        if not self.lifecycle.running:
            raise Conflict(f"cannot {what}: the run has ended ({self.lifecycle.state})")

    def pause(self, paused: bool) -> ControlStatus:
        """Pause (or resume) collection: collectors get the pause directive with their next reply."""
        self._running("pause or resume collection")
        self.control.paused = paused
        return self._controlled()

    def checkpoint_now(self) -> ControlStatus:
        self._running("checkpoint")
        self.control.checkpoints += 1
        return self._controlled()

    def evaluate_now(self, test: bool) -> ControlStatus:
        """The evaluator validates the latest version at once (on fresh validation seeds); with `test`, the judge
        asks for the held-out test of that version whatever its validation score."""
        self._running("evaluate")
        self.control.evaluations += 1
        if test:
            self.control.tests += 1
            self.judge.force_test = True
        return self._controlled("judge")

    def change_settings(self, settings: dict[str, Any]) -> ControlStatus:
        self._running("change settings")
        before = self.config
        after = self.control.change(before, settings, self.plan.spec.name)
        self.control.record(before, after, settings, self.data.env_steps, self.lifecycle.wall_seconds(self.clock()))
        self._apply(after)
        return self._controlled("config")

    def _apply(self, config: RunConfig) -> None:
        """Hand a changed config to the parts that read it while running; workers re-read their tasks."""
        self.config = config
        self.plan = dataclasses.replace(self.plan, config=config,
                                        behaviour=self.plan.spec.behaviour(config, self.plan.spaces))
        self.data.config = config
        self.data.limiter.spi = config.replay.samples_per_insert
