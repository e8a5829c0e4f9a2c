"""The chunk loop: whole fresh chunks from an on-policy queue, each consumed once (on-policy learners; their
knobs are `ChunkParams`). Collectors collect chunks; the coordinator's data plane is all it needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlfleet.shared.config.samplers import samplers_where
from rlfleet.shared.loops.kind import LoopKind

if TYPE_CHECKING:
    from rlfleet.shared.config.run_config import RunConfig


def _check(config: RunConfig) -> None:
    """An on-policy learner must see each fresh chunk whole and exactly once."""
    name, unit, sampler, max_use = config.algo.name, config.sampling.unit, config.replay.sampler, config.replay.max_use
    if unit != "chunk":
        raise ValueError(f"{name} trains on whole chunks: set sampling.unit=chunk (got {unit})")
    if not config.replay.traits.queue or max_use != 1:
        raise ValueError(f"{name} consumes each chunk once: set replay.sampler={samplers_where(queue=True)[0]} and "
                         f"replay.max_use=1 (got {sampler}, max_use={max_use})")


KIND = LoopKind(
    name="chunks",
    summary="whole fresh chunks from an on-policy queue, consumed once",
    collector_work="chunks",
    workload="rlfleet.coordinator.workloads.data_plane:DataPlaneWorkload",
    trainer="rlfleet.learner_worker.loops:ChunkTrainer",
    check=_check,
)
