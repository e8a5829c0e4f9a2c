"""The workload of the replay and chunk loops: they need nothing beyond the data plane every run has (chunk
reports in, samples out), so they add no component, route, status section, counter or tick work."""

from __future__ import annotations

from typing import ClassVar

from rlfleet.coordinator.journal.component import Component
from rlfleet.coordinator.operations.context import RunContext
from rlfleet.coordinator.operations.workload import StatusSections
from rlfleet.shared.wire import LearnReport


class DataPlaneWorkload:
    counters: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(self, ctx: RunContext) -> None:
        self.operations: object | None = None

    def build(self) -> tuple[Component, ...]:
        return ()

    def tick(self) -> None:
        pass

    def learned(self, report: LearnReport) -> None:
        pass

    def status(self, now: float) -> StatusSections:
        return {}

    def train_seeds(self) -> list[int]:
        return []

    def counts(self) -> dict[str, int]:
        return {}
