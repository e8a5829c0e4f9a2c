"""The dataset loop: epochs over a recorded dataset's train split, served by the coordinator (learners of
recordings; their knobs are `DatasetParams`). No collectors (they exit at once) and no buffer: the coordinator
serves the epochs and ends the run after the last (coordinator/workloads/dataset.py)."""

from __future__ import annotations

from rlfleet.shared.loops.kind import LoopKind

KIND = LoopKind(
    name="dataset",
    summary="epochs over a recorded dataset's train split, served by the coordinator; no collectors",
    collector_work="none",
    workload="rlfleet.coordinator.workloads.dataset:DatasetWorkload",
    trainer="rlfleet.learner_worker.dataset_loop:DatasetTrainer",
    router="rlfleet.coordinator.api.routes.datasets:router",
    wire="rlfleet.shared.wire.dataset_batches",
)
