"""Operator control of a running run: pause collection, checkpoint now, evaluate (and test) now, live settings.

Commands reach workers as counters in every reply's directive (`checkpoints`, `evaluations`, `settings`): a
worker that has handled fewer acts once, so a command is neither lost nor repeated by retries, restarts or
long polls. A pause reaches collectors as the usual pause directive.

Live settings are the dotted config paths the algorithm's registry entry declares (`AlgorithmSpec.live`); a
change is validated against the whole run config (a value out of range is a 422 naming the field and its
bounds), journalled with the config, shown in status, and marks the run as not reproducible.

Checkpoint loads from other runs (coordinator/operations/checkpoint_loads.py) are kept here too: each load by its
request id (a retry finds it and changes nothing), the latest one named in learners' directives, and the count of
loads refused as incompatible. Persisted under the meta key `control`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import ValidationError

from rlfleet.coordinator.errors import Conflict, Invalid
from rlfleet.coordinator.journal.component import Pending, Stored, Table
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.wire import CheckpointLoad, CheckpointLoadRef, ControlStatus, SettingChange


class Control:
    key: ClassVar[str] = "control"
    tables: ClassVar[tuple[Table, ...]] = ()

    def __init__(self, live: tuple[str, ...]) -> None:
        self.live = live
        self.pending = Pending()
        self.paused = False
        self.checkpoints = self.evaluations = self.tests = 0
        self.changes: list[SettingChange] = []
        self.loads: list[CheckpointLoad] = []
        self.load_refusals = 0

    def pause(self, paused: bool) -> None:
        self.paused = paused
        self.pending.mark()

    def checkpoint(self) -> None:
        self.checkpoints += 1
        self.pending.mark()

    def evaluate(self, test: bool) -> None:
        self.evaluations += 1
        self.tests += test
        self.pending.mark()

    def change(self, config: RunConfig, settings: dict[str, Any], algorithm: str) -> RunConfig:
        """The run config with `settings` applied (refused whole if any one is not live or not valid)."""
        not_live = sorted(set(settings) - set(self.live))
        if not_live:
            raise Conflict(f"{', '.join(not_live)} cannot change while {algorithm} trains; its live settings: "
                           f"{', '.join(self.live)}")
        doc = config.model_dump(mode="json")
        for key, value in settings.items():
            *path, leaf = key.split(".")
            node = doc
            for part in path:
                node = node[part]
            node[leaf] = value
        try:
            return RunConfig.model_validate(doc)
        except ValidationError as exc:
            raise Invalid("; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
                                    for err in exc.errors()[:5])) from None

    def record(self, before: RunConfig, after: RunConfig, settings: dict[str, Any], env_steps: int,
               wall_seconds: float) -> None:
        old_doc, new_doc = before.model_dump(mode="json"), after.model_dump(mode="json")
        for key in settings:
            self.changes.append(SettingChange(key=key, old=_get(old_doc, key), new=_get(new_doc, key),
                                              env_steps=env_steps, wall_seconds=wall_seconds))
        self.pending.mark()

    def load(self, load: CheckpointLoad) -> None:
        self.loads.append(load)
        self.pending.mark()

    def refuse_load(self) -> None:
        self.load_refusals += 1
        self.pending.mark()

    def load_of(self, load_id: str) -> CheckpointLoad | None:
        return next((load for load in self.loads if load.load_id == load_id), None)

    @property
    def latest_load(self) -> CheckpointLoadRef | None:
        """What learners are told to continue from: the latest load's staged file."""
        if not self.loads:
            return None
        load_id = self.loads[-1].load_id
        return CheckpointLoadRef(load_id=load_id, path=staged_path(load_id))

    def status(self) -> ControlStatus:
        return ControlStatus(paused=self.paused, checkpoints=self.checkpoints, evaluations=self.evaluations,
                             tests=self.tests, changes=list(self.changes), live_settings=list(self.live),
                             loads=list(self.loads), load_refusals=self.load_refusals,
                             reproducible=not self.changes and not self.loads)

    def state_dict(self) -> dict[str, Any]:
        return {"paused": self.paused, "checkpoints": self.checkpoints, "evaluations": self.evaluations,
                "tests": self.tests, "changes": [c.model_dump(mode="json") for c in self.changes],
                "loads": [load.model_dump(mode="json") for load in self.loads], "load_refusals": self.load_refusals}

    def load_state_dict(self, stored: Stored, now: float) -> None:
        state = stored.meta
        if state is None:  # a journal from before the control plane
            return
        self.paused = bool(state["paused"])
        self.checkpoints, self.evaluations, self.tests = (int(state[k]) for k in ("checkpoints", "evaluations",
                                                                                  "tests"))
        self.changes = [SettingChange.model_validate(c) for c in state["changes"]]
        # Journals from before checkpoint loads hold neither key.
        self.loads = [CheckpointLoad.model_validate(load) for load in state.get("loads", ())]
        self.load_refusals = int(state.get("load_refusals", 0))


def staged_path(load_id: str) -> str:
    """Where a load's checkpoint is staged in this run's checkpoints store (beside the run's own checkpoints,
    whose names it cannot take)."""
    return f"loads/{load_id}.pt"


def _get(doc: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        doc = doc[part]
    return doc
