"""The learner's side of hyperparameter schedules (shared/config/schedules.py): before every update, each scheduled
field's value for where the run stands, set on the learner.

Learners read their hyperparameters from `self.cfg` at every update and their learning rate from their optimizers, so a
schedule needs nothing from any algorithm: the learner's `cfg` is replaced by a copy holding the scheduled values, and
every optimizer the learner holds (one, or an actor's, critics' and temperature's), directly or in a part it composes
(the Q-learners' `QNetworks`), takes a scheduled learning rate. Schedules start from the run's configured values, never
from the learner's current ones, so applying them is idempotent and a resumed learner lands where the run is. In a
learner group every rank must use the same values (their weights stay equal only if their steps do): the env steps a
schedule reads are agreed over the ranks first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from rlfleet.learner_worker.optimizers import BackgroundOptimizer
from rlfleet.shared.algorithms.base import AlgoParams

if TYPE_CHECKING:
    from rlfleet.learner_worker.distributed import Group


class Schedules:
    def __init__(self, algo: AlgoParams, group: Group | None) -> None:
        self.algo, self.group = algo, group
        self.by_env_steps = any(s.unit == "env_steps" for s in algo.schedules.values())

    def apply(self, learner: Any, env_steps: int, updates: int) -> dict[str, float]:
        """Set the scheduled values for `env_steps` (the run's) and `updates` (the learner's) on `learner`; returns
        them by field name (empty without schedules), for the learner's report."""
        if not self.algo.schedules:
            return {}
        if self.group is not None and self.by_env_steps:  # each rank's directive may be a poll behind another's
            env_steps = round(self.group.sum(torch.tensor([float(env_steps)])).item() / self.group.world_size)
        values = {field: schedule.value(getattr(self.algo, field), env_steps if schedule.unit == "env_steps"
                                        else updates) for field, schedule in self.algo.schedules.items()}
        learner.cfg = learner.cfg.model_copy(update=values)
        if "learning_rate" in values:
            for optimizer in optimizers(learner):
                for group in optimizer.optimizer.param_groups:
                    group["lr"] = values["learning_rate"]
        return values


def optimizers(learner: Any) -> list[BackgroundOptimizer]:
    """The optimizers `learner` holds as attributes, its own or those of the parts it composes (one level down)."""
    found = []
    for held in vars(learner).values():
        if isinstance(held, BackgroundOptimizer):
            found.append(held)
        elif hasattr(held, "__dict__") and not isinstance(held, torch.nn.Module):
            found.extend(part for part in vars(held).values() if isinstance(part, BackgroundOptimizer))
    return found
