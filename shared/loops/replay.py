"""The replay loop: batches of transitions with n-step targets, drawn from a replay buffer (off-policy learners;
their knobs are `ReplayParams`). Collectors collect chunks; the coordinator's data plane is all it needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlfleet.shared.config.samplers import samplers_where
from rlfleet.shared.loops.kind import LoopKind

if TYPE_CHECKING:
    from rlfleet.shared.config.run_config import RunConfig


def _check(config: RunConfig) -> None:
    """A replay learner samples transitions again and again: a queue, or whole chunks, would starve it."""
    name, unit, sampler = config.algo.name, config.sampling.unit, config.replay.sampler
    if unit != "transition":
        raise ValueError(f"{name} trains on transitions: set sampling.unit=transition (got {unit})")
    if config.replay.traits.queue:
        raise ValueError(f"{name} samples a replay buffer: set replay.sampler to "
                         f"{' or '.join(samplers_where(queue=False))} (got {sampler})")


KIND = LoopKind(
    name="replay",
    summary="batches of transitions with n-step targets, from a replay buffer",
    collector_work="chunks",
    workload="rlfleet.coordinator.workloads.data_plane:DataPlaneWorkload",
    trainer="rlfleet.learner_worker.loops:ReplayTrainer",
    check=_check,
)
