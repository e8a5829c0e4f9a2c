"""What every persisted part of the coordinator's state is: a `Component`.

A component owns a slice of the run's state and its persistence: a meta `key` under which its `state_dict()` is
journalled (JSON), the journal `tables` it writes rows to, and `load_state_dict(stored, now)` to come back from
what the journal holds. It records its own changes in `pending` as it mutates (the rows to write, a replay-log
payload files freed), so the unit of work that runs an operation commits exactly the components it
touched and no call site has to say which (TorchRL's storage / sampler / writer each persist themselves the
same way).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from rlfleet.coordinator.journal.committer import Statement


@dataclass(frozen=True)
class Table:
    """A journal table a component owns: its DDL (created when the run opens the journal) and the query whose
    rows come back to the component on a restart."""

    name: str
    ddl: str
    select: str


@dataclass
class Stored:
    """A component's durable state as read back: its meta value (None when the journal has none, as in a
    journal written before the component existed) and the rows of each table it owns."""

    meta: Any = None
    rows: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)


@dataclass
class Pending:
    """Changes a component made since its state was last handed to the journal. `dirty` asks for its
    `state_dict` to be written; `rows` are statements on its tables, in the order made; `freed` the payload files
    to delete once the commit is durable."""

    dirty: bool = False
    rows: list[Statement] = field(default_factory=list)
    freed: list[str] = field(default_factory=list)

    def mark(self, rows: Sequence[Statement] = ()) -> None:
        self.dirty = True
        self.rows.extend(rows)

    def clear(self) -> None:
        self.dirty, self.rows, self.freed = False, [], []


class Component(Protocol):
    key: ClassVar[str]
    tables: ClassVar[tuple[Table, ...]]
    pending: Pending

    def state_dict(self) -> Any: ...

    def load_state_dict(self, stored: Stored, now: float) -> None: ...
