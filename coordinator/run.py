"""The run: the composition root of the coordinator's domain.

`RunContext` (coordinator/operations/context.py) owns the components and their persistence; each group of
operations (coordinator/operations/*) works over it; the routes call the groups. Nothing here inherits from
anything: a new kind of work adds its operations module and one line below.
"""

from __future__ import annotations

from typing import Any

from coordinator.observe.scrape import RunCollector
from coordinator.observe.status import build_status
from coordinator.operations.chunks import Chunks
from coordinator.operations.context import RunContext
from coordinator.operations.control import Controls
from coordinator.operations.datasets import DatasetFeed
from coordinator.operations.evaluations import Evaluations
from coordinator.operations.generations import Population
from coordinator.operations.housekeeping import Housekeeping
from coordinator.operations.learning import Learning
from coordinator.operations.publishing import Publishing
from coordinator.operations.workers import Workers
from shared.config.run_config import RunConfig
from shared.storage.protocol import PayloadStore
from shared.wire import Status


class Run:
    def __init__(self, config: RunConfig, store: PayloadStore, **options: Any) -> None:
        """`options` are RunContext's: sizes, clocks, the journal, telemetry, the dataset store."""
        self.ctx = ctx = RunContext(config, store, **options)
        self.workers = Workers(ctx)
        self.chunks = Chunks(ctx)
        self.learning = Learning(ctx)
        self.publishing = Publishing(ctx)
        self.evaluations = Evaluations(ctx)
        self.controls = Controls(ctx)
        self.population = Population(ctx)
        self.dataset_feed = DatasetFeed(ctx)
        self.housekeeping = Housekeeping(ctx)

    def tick(self) -> None:
        self.housekeeping.tick()
        self.dataset_feed.end_when_trained()

    def status(self) -> Status:
        return build_status(self.ctx, self.housekeeping.steps_per_second())

    def metrics(self) -> RunCollector:
        """The run's counters, read by Prometheus when it scrapes."""
        return RunCollector(self.ctx, self.housekeeping.steps_per_second)
