"""Unit tests of the coordinator's components without a Run: a real journal that a component is committed to
and restored from (as across a coordinator restart), and chunk reports built from a run config alone."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from rlfleet.coordinator.journal.component import Component, Stored
from rlfleet.coordinator.journal.database import Journal
from rlfleet.coordinator.journal.unit import UnitOfWork
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.layout import chunk_path
from rlfleet.shared.wire import ChunkReport, EpisodeStat
from tests.support.chunks import spread_ends
from tests.support.journal import journal_with

C = TypeVar("C", bound=Component)


class JournalFor:
    """A real SQLite journal at `path` holding one component's tables, committed to through a `UnitOfWork` as an
    operation commits. `freed` collects the payload files the commits handed over for deletion."""

    def __init__(self, path: Path, component: Component) -> None:
        self.path, self.component = path, component
        self.journal = journal_with(component.tables, path)
        self.freed: list[str] = []
        self.unit = UnitOfWork(self.journal, [component], self.freed.extend)

    def commit(self) -> None:
        """Journal what the component changed since the last commit, and wait until it is durable."""
        self.unit.commit().result(timeout=10)

    def stored(self) -> Stored:
        """What a restarted coordinator reads back for the component: the journal file closed and reopened."""
        self.journal.close()
        reopened = Journal(self.path)
        try:
            loaded = reopened.load([self.component.key], self.component.tables)
        finally:
            reopened.close()
        assert loaded is not None, "nothing was committed to the journal"
        return loaded[1][self.component.key]

    def restore(self, fresh: C, now: float) -> C:
        """`fresh` (a newly built component of the same kind) loaded from the journal file, reopened as a
        restarted coordinator reopens it."""
        fresh.load_state_dict(self.stored(), now)
        return fresh


def report(config: RunConfig, chunk_id: str, worker_id: str = "collector-1-abcdef", task_id: str = "collector-0",
           returns: Sequence[float] = (), policy_version: int = 0, **changes: Any) -> ChunkReport:
    """A report of a full chunk in `config`'s layout (num_envs x chunk_steps rows, one episode end per return);
    no payload is written: components never read one. `changes` override any field."""
    rows = config.collector.num_envs * config.collector.chunk_steps
    fields: dict[str, Any] = dict(
        chunk_id=chunk_id, worker_id=worker_id, task_id=task_id, payload_path=chunk_path(task_id, chunk_id),
        sha256=hashlib.sha256(chunk_id.encode()).hexdigest(), size_bytes=100, env_steps=rows,
        num_envs=config.collector.num_envs, episodes=[EpisodeStat(ret=r, length=10) for r in returns],
        ends=spread_ends(rows, len(returns)), policy_version=policy_version)
    fields.update(changes)
    return ChunkReport(**fields)
