"""SQLite (WAL) journal of the coordinator's state, so a restarted coordinator continues the same run.

The journal knows no component: components (coordinator/journal/component.py) declare the tables they own and
hand their `state_dict`s (meta values, one key each) and row statements to the unit of work, which submits them
to the group committer; a reply leaves only after its commit. WAL with synchronous=NORMAL survives a killed
process (kill -9) without losing committed transactions; synchronous=FULL (setting `db_synchronous`) also
survives power loss.

The `meta` table holds each component's state under its key, plus the format version; every other table belongs
to one component (coordinator/state/*: its `tables`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from rlfleet.coordinator.journal.committer import GroupCommitter, Statement
from rlfleet.coordinator.journal.component import Stored, Table

FORMAT = 2  # bumped whenever a table or a meta key changes meaning; a mismatch is refused, never misread
META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"


class JournalFormatError(RuntimeError):
    """The journal was written by a different format of rlfleet; it is refused rather than misread."""


class Journal:
    def __init__(self, path: Path | None, synchronous: str = "NORMAL") -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"db_synchronous must be NORMAL or FULL, got {synchronous!r}")
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path) if path else ":memory:", check_same_thread=False,
                                   isolation_level=None)
        self._lock = threading.Lock()  # the writer thread and direct readers share one connection
        if path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self._check_format(path)
        self._db.executescript(META)
        self.committer = GroupCommitter(self._db, self._lock)

    def _check_format(self, path: Path | None) -> None:
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "meta" not in tables:
            return
        row = self._db.execute("SELECT value FROM meta WHERE key='journal_format'").fetchone()
        found = json.loads(row[0]) if row else 1
        has_rows = self._db.execute("SELECT COUNT(*) FROM meta").fetchone()[0] > 0
        if has_rows and found != FORMAT:
            raise JournalFormatError(
                f"journal {path} has format {found}; this coordinator reads format {FORMAT}. Resume it with the "
                f"rlfleet version that wrote it, or start a new run (another run name or data directory).")

    def create(self, tables: Iterable[Table]) -> None:
        """Create the components' tables (if the journal has none yet)."""
        with self._lock:
            self._db.executescript("\n".join(t.ddl for t in tables))

    def close(self) -> None:
        self.committer.close()
        with self._lock:
            self._db.close()

    def submit(self, statements: list[Statement], meta: dict[str, Any] | None = None,
               after: Callable[[], None] | None = None) -> Future[None]:
        return self.committer.submit(statements, meta, after)

    def meta(self) -> dict[str, Any]:
        """Every committed meta value (after everything submitted so far is committed); empty for a new run."""
        self.committer.drain()
        with self._lock:
            return {k: json.loads(v) for k, v in self._db.execute("SELECT key, value FROM meta")}

    def load(self, keys: Iterable[str], tables: Iterable[Table]) -> tuple[dict[str, Any], dict[str, Stored]] | None:
        """The committed state: every meta value, and for each component key its `Stored` (its meta value and the
        rows of `tables`, each component reading its own); None for a new run."""
        meta = self.meta()
        if not meta:
            return None
        with self._lock:
            rows = {t.name: self._db.execute(t.select).fetchall() for t in tables}
        return meta, {key: Stored(meta.get(key), rows) for key in keys}


def stored_meta(path: Path, *keys: str) -> dict[str, Any]:
    """Meta values of a journal file, read without opening it as a `Journal` (no writer thread, no schema
    created, read-only): for tools looking at runs that may be live. Missing keys (or no file, or nothing
    committed yet) are left out."""
    if not path.exists():
        return {}
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        marks = ", ".join("?" * len(keys))
        rows = db.execute(f"SELECT key, value FROM meta WHERE key IN ({marks})", keys).fetchall()
    except sqlite3.OperationalError:  # no meta table yet
        return {}
    finally:
        db.close()
    return {key: json.loads(value) for key, value in rows}


def stored_rows(path: Path, table: Table) -> list[tuple[Any, ...]]:
    """The rows of a component's table in a journal file, by the table's own select, read-only like
    `stored_meta`: for tools reading a run's history (`rlfleet report`: its validations). Empty when there is
    no file or no such table yet."""
    if not path.exists():
        return []
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return db.execute(table.select).fetchall()
    except sqlite3.OperationalError:  # the table was never created (a run that did not start)
        return []
    finally:
        db.close()


def stored_run_state(path: Path) -> str | None:
    """The run state (running, solved, ...) a journal file holds: how a starting coordinator tells a finished
    run from one to resume. None when there is no file, or nothing was committed to it yet."""
    lifecycle = stored_meta(path, "lifecycle").get("lifecycle")
    return None if lifecycle is None else str(lifecycle["state"])
