"""The population loop: generations of perturbed policies that collectors evaluate (population-based learners;
their knobs are `PopulationParams`). No buffer: collectors claim members and report returns, the coordinator
keeps the generations (coordinator/workloads/population.py)."""

from __future__ import annotations

from rlfleet.shared.loops.kind import LoopKind

KIND = LoopKind(
    name="population",
    summary="generations of perturbed policies that collectors evaluate, no buffer",
    collector_work="members",
    workload="rlfleet.coordinator.workloads.population:PopulationWorkload",
    trainer="rlfleet.learner_worker.population:PopulationTrainer",
    router="rlfleet.coordinator.api.routes.generations:router",
    wire="rlfleet.shared.wire.generations",
)
