"""The dataset loop: epochs over a recorded dataset's train split, served by the coordinator (learners of
recordings; their knobs are `DatasetParams`). No collectors (they exit at once) and no buffer: the coordinator
serves the epochs and ends the run after the last (coordinator/workloads/dataset.py)."""

from __future__ import annotations

from shared.loops.kind import LoopKind

KIND = LoopKind(
    name="dataset",
    summary="epochs over a recorded dataset's train split, served by the coordinator; no collectors",
    collector_work="none",
    workload="coordinator.workloads.dataset:DatasetWorkload",
    trainer="learner_worker.dataset_loop:DatasetTrainer",
    router="coordinator.api.routes.datasets:router",
    wire="shared.wire.dataset_batches",
)
