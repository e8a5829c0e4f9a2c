"""The unit of work: an operation changes components in memory, then `commit` hands the journal exactly what it
touched — the state of every component whose `pending` is dirty, and the rows they wrote — in one
submission, and deletes the payload files they freed once (and only if) that submission is durable.

No call site names what it changed: a component records its own changes as it mutates (component.py). A reply
is released only after `settle` (coordinator/operations/context.py) has seen the commit through.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from rlfleet.coordinator.journal.committer import Statement
from rlfleet.coordinator.journal.component import Component
from rlfleet.coordinator.journal.database import FORMAT, Journal


class UnitOfWork:
    def __init__(self, journal: Journal, components: Sequence[Component],
                 delete_payloads: Callable[[list[str]], None]) -> None:
        self.journal = journal
        self.components = list(components)
        self._delete = delete_payloads

    def touched(self) -> list[Component]:
        return [c for c in self.components if c.pending.dirty or c.pending.rows or c.pending.freed]

    def commit(self, after: Callable[[], None] | None = None) -> Future[None]:
        """Submit everything the components changed since the last commit. Once durable, the freed payload files
        are queued for deletion and `after` runs, before anyone waiting for the commit is released. Nothing
        touched and nothing to run after: the barrier of what was submitted before."""
        touched = self.touched()
        if not touched and after is None:
            return self.journal.committer.barrier()
        meta: dict[str, Any] = {"journal_format": FORMAT}
        statements: list[Statement] = []
        freed: list[str] = []
        for component in touched:
            pending = component.pending
            if pending.dirty and (state := component.state_dict()) is not None:  # None: all in its tables
                meta[component.key] = state
            statements += pending.rows
            freed += pending.freed
            pending.clear()

        def durable() -> None:
            if freed:
                self._delete(freed)
            if after is not None:
                after()

        return self.journal.submit(statements, meta, durable)
