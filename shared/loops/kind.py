"""What one loop kind declares to the rest of rlfleet: its entry in the loop-kind registry (shared/loops/).

A loop kind is the shape of a run's training: where the learner's data comes from and what collectors do for it.
Each kind names the parts the services build for it as `module:Class` paths (strings, so this package stays free
of the services and of torch): the coordinator imports the kind's workload (the components, operations, status
section and tick work the kind adds to a run) and mounts its router; the learner imports its trainer. Nothing
outside a kind's own modules compares its name: they ask its entry (tests/shared/algorithms/test_registry.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from rlfleet.shared.config.run_config import RunConfig

# What a collector does in a run of the kind (CollectorTask.work): collect chunks, evaluate population members, or
# nothing (the run trains on a recording; the collector exits at once).
CollectorWork = Literal["chunks", "members", "none"]


def no_checks(config: RunConfig) -> None:
    """A kind with no buffer has no buffer settings to refuse."""


@dataclass(frozen=True)
class LoopKind:
    name: str
    """The name algorithms give in `AlgorithmSpec.loop`."""
    summary: str
    collector_work: CollectorWork
    workload: str  # "module:Class" of the coordinator's workload, imported by the coordinator only
    trainer: str  # "module:Class" of the learner's trainer, imported by learner processes only
    # Refuses buffer settings the kind cannot train on (ValueError naming the fields to change); called by
    # AlgorithmSpec.check, which the run config's validation runs.
    check: Callable[[RunConfig], None] = no_checks
    router: str | None = None  # "module:router" of the kind's REST routes, mounted by the coordinator in every run
    wire: str | None = None  # the module of shared/wire/ holding the kind's wire models

    @property
    def collects(self) -> bool:
        """Whether collectors play episodes that make chunks (and so self-play games) in a run of the kind."""
        return self.collector_work == "chunks"


def resolve(path: str) -> Any:
    """The object a `module:name` path names, imported on first use by the service that needs it."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)
