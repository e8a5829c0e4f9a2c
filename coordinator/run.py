"""The run: the composition root of the coordinator's domain.

`RunContext` (coordinator/operations/context.py) owns the components and their persistence; each group of
operations (coordinator/operations/*) works over it; the routes call the groups. What the run's loop kind adds
(coordinator/workloads/*: components, operations, status section, tick work) is its `workload`, built by the
context from the loop-kind registry (shared/loops/). Nothing here inherits from anything: a new group of core
operations adds its module and one line below; a new loop kind adds nothing here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlfleet.coordinator.observe.scrape import RunCollector
from rlfleet.coordinator.observe.status import build_status
from rlfleet.coordinator.observe.tracking import Tracking
from rlfleet.coordinator.operations.checkpoint_loads import CheckpointLoads
from rlfleet.coordinator.operations.chunks import Chunks
from rlfleet.coordinator.operations.context import RunContext
from rlfleet.coordinator.operations.control import Controls
from rlfleet.coordinator.operations.evaluations import Evaluations
from rlfleet.coordinator.operations.housekeeping import Housekeeping
from rlfleet.coordinator.operations.learning import Learning
from rlfleet.coordinator.operations.publishing import Publishing
from rlfleet.coordinator.operations.workers import Workers
from rlfleet.coordinator.operations.workload import Workload
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.protocol import PayloadStore
from rlfleet.shared.wire import Status


class Run:
    def __init__(self, config: RunConfig, store: PayloadStore, *, checkpoints: PayloadStore | None = None,
                 checkpoint_sources: tuple[Path, ...] = (), **options: Any) -> None:
        """`checkpoints` is the run's checkpoints store and `checkpoint_sources` the directories other runs'
        checkpoints may be loaded from (without them, loads are refused); `options` are RunContext's: sizes,
        clocks, the journal, telemetry, the dataset store."""
        self.ctx = ctx = RunContext(config, store, **options)
        # The run's experiment trackers, shown in status and metrics: none until the app sets them, from the
        # config the run resumed with (coordinator/main.py; the metrics recorder feeds them).
        self.tracking = Tracking()
        self.workers = Workers(ctx)
        self.chunks = Chunks(ctx)
        self.learning = Learning(ctx)
        self.publishing = Publishing(ctx)
        self.evaluations = Evaluations(ctx)
        self.controls = Controls(ctx)
        self.checkpoint_loads = CheckpointLoads(ctx, checkpoints, checkpoint_sources)
        self.housekeeping = Housekeeping(ctx)

    @property
    def workload(self) -> Workload:
        """The loop kind's part of the run (its components are rebuilt with the others after a failed commit)."""
        return self.ctx.workload

    def tick(self) -> None:
        self.housekeeping.tick()
        self.ctx.workload.tick()

    def status(self) -> Status:
        return build_status(self.ctx, self.housekeeping.steps_per_second(), self.tracking.status())

    def metrics(self) -> RunCollector:
        """The run's counters, read by Prometheus when it scrapes."""
        return RunCollector(self.ctx, self.housekeeping.steps_per_second, self.tracking.status)
