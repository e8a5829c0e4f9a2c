"""A real SQLite journal for tests of the coordinator's persistence: one holding given components' tables, what
its tables hold now, and a disk that refuses every write (to make a commit fail the way a full disk does)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rlfleet.coordinator.journal.component import Table
from rlfleet.coordinator.journal.database import Journal


def journal_with(tables: Iterable[Table], path: Path | None = None) -> Journal:
    """A journal (at `path`, or in memory) with `tables` created, as a run creates its components' tables."""
    journal = Journal(path)
    journal.create(tables)
    return journal


def rows(journal: Journal, sql: str) -> list[tuple[Any, ...]]:
    """What `sql` reads from the journal once everything submitted so far is committed."""
    journal.committer.drain()
    with journal._lock:
        return journal._db.execute(sql).fetchall()


def fill_journal(journal: Journal) -> None:
    """From now on every write to the journal's database fails inside SQLite, as on a full disk (SQLite refuses
    the statement; the coordinator sees the same OperationalError path as for SQLITE_FULL)."""

    def deny_writes(action: int, *_: object) -> int:
        return sqlite3.SQLITE_DENY if action in (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE,
                                                 sqlite3.SQLITE_DELETE) else sqlite3.SQLITE_OK

    with journal._lock:
        journal._db.set_authorizer(deny_writes)


def free_journal(journal: Journal) -> None:
    """The disk has room again: writes succeed (the committer still needs `clear()` after a failure)."""
    with journal._lock:
        journal._db.set_authorizer(None)
