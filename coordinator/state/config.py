"""The run's config as it stands: the file it started with, plus live settings an operator changed since.

Persisted under the meta key `config`, so a resumed run trains with what it last had (the config file's later
changes are ignored, with a warning). The plan (spaces, behaviour, the algorithm's spec) is derived from it and
rebuilt on a change.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from rlfleet.coordinator.journal.component import Pending, Stored, Table
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import RunConfig


class LiveConfig:
    key: ClassVar[str] = "config"
    tables: ClassVar[tuple[Table, ...]] = ()

    def __init__(self, config: RunConfig) -> None:
        self.pending = Pending()
        self.config = config
        self.plan = RunPlan.of(config)

    def apply(self, config: RunConfig) -> None:
        """A changed config (live settings): the behaviour it implies is derived again."""
        self.config = config
        self.plan = dataclasses.replace(self.plan, config=config,
                                        behaviour=self.plan.spec.behaviour(config, self.plan.spaces))
        self.pending.mark()

    def state_dict(self) -> dict[str, Any]:
        return self.config.model_dump(mode="json")

    def load_state_dict(self, stored: Stored, now: float) -> None:
        """The config was read from the journal before anything was built (it decides what is built): nothing is
        left to restore."""
