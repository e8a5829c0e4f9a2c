"""The dataset loop's workload: the server of the run's recording (coordinator/state/datasets.py), the batches
its route serves (coordinator/operations/datasets.py), its status section, the epoch scores taken from learn
reports, and the run's end once every epoch was trained and judged."""

from __future__ import annotations

from typing import ClassVar

from rlfleet.coordinator.journal.component import Component
from rlfleet.coordinator.operations.context import RunContext
from rlfleet.coordinator.operations.datasets import DatasetFeed
from rlfleet.coordinator.operations.workload import StatusSections
from rlfleet.coordinator.state.datasets import DatasetServer, dataset_server
from rlfleet.shared.algorithms.base import DatasetParams
from rlfleet.shared.wire import LearnReport


class DatasetWorkload:
    counters: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.server: DatasetServer  # by build(), which the run calls before anything else
        self.operations = DatasetFeed(ctx, self)

    def build(self) -> tuple[Component, ...]:
        """A server of the run's recording, refused (DatasetError) if the recording cannot be used."""
        config = self.ctx.config
        if not isinstance(config.algo, DatasetParams):
            raise TypeError(f"{config.algo.name} runs on the dataset loop: its parameters must derive from "
                            "DatasetParams")
        self.server = dataset_server(config.algo, config.seed, self.ctx.plan.spaces, self.ctx.dataset_store)
        return (self.server,)

    def tick(self) -> None:
        self.operations.end_when_trained()

    def learned(self, report: LearnReport) -> None:
        self.server.record_scores(report.losses)

    def status(self, now: float) -> StatusSections:
        return {"dataset": self.server.status()}

    def train_seeds(self) -> list[int]:
        return []

    def counts(self) -> dict[str, int]:
        return {}
