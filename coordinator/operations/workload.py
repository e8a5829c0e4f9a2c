"""What a run's loop kind adds to the coordinator: its workload (the kinds are registered in shared/loops/).

A workload owns the loop kind's extra components (journalled with the core ones, in the same unit of work), its
operations object (what its routes call), its status section, its counters for the Prometheus scrape, its work on
the housekeeping tick and its hook on learn reports. `RunContext` builds the run's workload from the kind's
`module:Class` path, so the core operations here know only this protocol, never a kind (the implementations live
in coordinator/workloads/, a layer above this one). The workload lives as long as the run; its components are
built afresh, like the core ones, whenever the run reloads them from the journal (after a failed commit), and its
operations reach them through it, so a request waiting across that reload acts on the reloaded state.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, ClassVar, Protocol, TypedDict

from rlfleet.coordinator.journal.component import Component
from rlfleet.shared.loops import LOOPS
from rlfleet.shared.loops.kind import LoopKind, resolve
from rlfleet.shared.wire import DatasetStatus, LearnReport, PopulationStatus

if TYPE_CHECKING:
    from rlfleet.coordinator.operations.context import RunContext


class StatusSections(TypedDict, total=False):
    """The sections of the run's status document that belong to one loop kind (null in runs of other kinds)."""

    population: PopulationStatus
    dataset: DatasetStatus


class Workload(Protocol):
    # (name, help) of the counters the kind adds to the scrape; every run emits every kind's, 0 where its kind has
    # none, so a dashboard keeps its series whatever the run trains.
    counters: ClassVar[tuple[tuple[str, str], ...]]
    operations: object | None  # what the kind's routes call (coordinator/api/deps.py `loop_operations`)

    def __init__(self, ctx: RunContext) -> None: ...

    def build(self) -> tuple[Component, ...]:
        """The kind's components, new (the run restores their state from the journal next)."""
        ...

    def tick(self) -> None:
        """Work on the coordinator's clock, after the housekeeping."""

    def learned(self, report: LearnReport) -> None:
        """A learn report has been taken (before it is committed)."""

    def status(self, now: float) -> StatusSections: ...

    def train_seeds(self) -> list[int]:
        """Train seeds used beyond the collectors' blocks (SeedsUsed.train)."""
        ...

    def counts(self) -> dict[str, int]:
        """The current value of each of `counters`."""
        ...


@cache
def workload_of(kind: LoopKind) -> type[Workload]:
    """The workload class of a loop kind, imported on first use."""
    workload: type[Workload] = resolve(kind.workload)
    return workload


def every_counter() -> list[tuple[str, str]]:
    """(name, help) of every counter any registered loop kind adds, each once, in registry order."""
    return list(dict.fromkeys(c for kind in LOOPS.values() for c in workload_of(kind).counters))
