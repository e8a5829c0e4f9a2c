"""The operator's commands on a running run (coordinator/state/control.py holds their state and rules): pause,
checkpoint now, evaluate (and test) now, live settings, stop."""

from __future__ import annotations

from typing import Any

from rlfleet.coordinator.errors import Conflict
from rlfleet.coordinator.operations.context import RunContext
from rlfleet.shared.config.schedules import live_changes
from rlfleet.shared.wire import ControlStatus


class Controls:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def _done(self) -> ControlStatus:
        self.ctx.commit()
        return self.ctx.control.status()

    def pause(self, paused: bool) -> ControlStatus:
        """Pause (or resume) collection: collectors get the pause directive with their next reply."""
        self.ctx.running("pause or resume collection")
        self.ctx.control.pause(paused)
        return self._done()

    def checkpoint_now(self) -> ControlStatus:
        self.ctx.running("checkpoint")
        self.ctx.control.checkpoint()
        return self._done()

    def evaluate_now(self, test: bool) -> ControlStatus:
        """The evaluator validates the latest version at once (on fresh validation seeds); with `test`, the judge
        asks for the held-out test of that version whatever its validation score."""
        self.ctx.running("evaluate")
        self.ctx.control.evaluate(test)
        if test:
            self.ctx.judge.force()
        return self._done()

    def change_settings(self, settings: dict[str, Any]) -> ControlStatus:
        """Apply live settings to the parts that read them while running; workers re-read their tasks."""
        ctx = self.ctx
        ctx.running("change settings")
        before = ctx.config
        settings = live_changes(before.algo, settings, ctx.data.env_steps, ctx.learner.iteration)
        after = ctx.control.change(before, settings, ctx.plan.spec.name)
        learners = [key for key in settings if key.startswith("algo.")]
        if learners and before.learner.replicas > 1:  # its ranks would have to take them up at one same update
            raise Conflict(f"{', '.join(learners)} cannot change while a learner group of "
                           f"{before.learner.replicas} trains: live changes of the algorithm's settings reach a "
                           "single learner only")
        ctx.control.record(before, after, settings, ctx.data.env_steps, ctx.lifecycle.wall_seconds(ctx.clock()))
        ctx.settings.apply(after)
        ctx.data.reconfigure(after)
        return self._done()

    def stop(self, reason: str) -> None:
        self.ctx.end("stopped", reason)
