"""SQLite (WAL) journal of the coordinator's state, so a restarted coordinator continues the same run.

Components describe their changes as statements (built here, one function per table) and meta values (their
`state_dict`s); `Journal.submit` hands them to the group committer, and a reply leaves only after its commit.
WAL with synchronous=NORMAL survives a killed process (kill -9) without losing committed transactions;
synchronous=FULL (setting `db_synchronous`) also survives power loss.

Tables: `meta` (each component's state under its own key, plus the format version and the run config),
`chunks` (acknowledged chunks: buffer rows while in the buffer, then only their id and hash for the
idempotency window), `replay_log` (priority updates and counted draws since the last buffer snapshot),
`policies`, `evaluations`, `tasks`, `workers`, `replies` (each learner's last sample reply, for retries).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from coordinator.committer import GroupCommitter, Statement
from coordinator.replay.buffer import Entry

FORMAT = 2  # bumped whenever a table or a meta key changes meaning; a mismatch is refused, never misread
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, chunk_id TEXT UNIQUE NOT NULL, sha256 TEXT NOT NULL,
    payload_path TEXT NOT NULL, transitions INTEGER NOT NULL, policy_version INTEGER NOT NULL,
    num_envs INTEGER NOT NULL, ends TEXT NOT NULL, fresh TEXT NOT NULL, base_id INTEGER NOT NULL,
    initial_leaf REAL NOT NULL, in_buffer INTEGER NOT NULL, worker_id TEXT NOT NULL, acked_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS replay_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,
    ids BLOB NOT NULL, vals BLOB, uses BLOB, head INTEGER);
CREATE INDEX IF NOT EXISTS chunks_in_buffer ON chunks (in_buffer, seq);
CREATE TABLE IF NOT EXISTS policies (version INTEGER PRIMARY KEY, path TEXT NOT NULL, sha256 TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS evaluations (seq INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL,
    request_id TEXT);
CREATE TABLE IF NOT EXISTS tasks (task_id TEXT PRIMARY KEY, kind TEXT NOT NULL, idx INTEGER NOT NULL,
    claims INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS workers (worker_id TEXT PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL,
    task_id TEXT, restarts INTEGER NOT NULL DEFAULT 0, request_id TEXT);
CREATE TABLE IF NOT EXISTS replies (worker_id TEXT PRIMARY KEY, request_id TEXT NOT NULL, body TEXT NOT NULL);
"""


class JournalFormatError(RuntimeError):
    """The journal was written by a different format of rlfleet; it is refused rather than misread."""


@dataclass
class ReplayRecord:
    """One buffer event since the last snapshot: 'priority' (ids, priorities), 'use' (drawn ids) or 'snapshot'
    (ids, sum-tree leaves, uses of every live item when the next row id was `head`)."""

    kind: str
    ids: np.ndarray
    values: np.ndarray | None = None
    uses: np.ndarray | None = None
    head: int | None = None


@dataclass
class Snapshot:
    """Everything a restarted coordinator needs, as read back from the journal."""

    meta: dict[str, Any]
    acked: list[tuple[str, str, float]]  # (chunk id, sha256, acked_at) still in the idempotency window
    buffer: list[tuple[Entry, int, float, str]]  # (entry, base row id, initial leaf, worker id), insertion order
    policies: list[tuple[int, str, str]]
    evaluations: list[tuple[str, str | None]]  # (result JSON, request id)
    tasks: list[tuple[str, str, int, int]]
    workers: list[tuple[str, str, str, str | None, int, str | None]] = field(default_factory=list)
    replay_log: list[ReplayRecord] = field(default_factory=list)
    replies: list[tuple[str, str, str]] = field(default_factory=list)


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
        self._db.executescript(SCHEMA)
        self._replay_records = int(self._db.execute("SELECT COUNT(*) FROM replay_log").fetchone()[0])
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

    def close(self) -> None:
        self.committer.close()
        with self._lock:
            self._db.close()

    # ----- writes ------------------------------------------------------------------------------------------
    def submit(self, statements: list[Statement], meta: dict[str, Any] | None = None,
               after: Callable[[], None] | None = None) -> Future[None]:
        return self.committer.submit(statements, meta, after)

    def submit_replay(self, record: ReplayRecord, statements: list[Statement], meta: dict[str, Any] | None = None,
                      after: Callable[[], None] | None = None) -> Future[None]:
        """Append a buffer event; a snapshot replaces every earlier event."""
        stmts: list[Statement] = [("DELETE FROM replay_log", ())] if record.kind == "snapshot" else []
        stmts.append(("INSERT INTO replay_log (kind, ids, vals, uses, head) VALUES (?, ?, ?, ?, ?)", (
            record.kind, record.ids.astype("<i8").tobytes(),
            None if record.values is None else record.values.astype("<f8").tobytes(),
            None if record.uses is None else record.uses.astype("<i4").tobytes(), record.head)))
        self._replay_records = 1 if record.kind == "snapshot" else self._replay_records + 1
        return self.submit(stmts + statements, meta, after)

    def replay_log_length(self) -> int:
        """Records in `replay_log`: counted once on open, then as they are written (no query per tick)."""
        return self._replay_records

    def recount(self) -> None:
        """After a failed commit, count what really is in the log again."""
        with self._lock:
            self._replay_records = int(self._db.execute("SELECT COUNT(*) FROM replay_log").fetchone()[0])

    # ----- reads -------------------------------------------------------------------------------------------
    def load(self) -> Snapshot | None:
        """The committed state (after everything submitted so far is committed), or None for a new run."""
        self.committer.drain()
        with self._lock:
            db = self._db
            meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
            if not meta:
                return None
            rows = db.execute(
                "SELECT chunk_id, sha256, payload_path, transitions, policy_version, num_envs, ends, fresh, "
                "base_id, initial_leaf, in_buffer, worker_id, acked_at FROM chunks ORDER BY seq").fetchall()
            log = [ReplayRecord(kind, np.frombuffer(ids, "<i8").astype(np.int64),
                                None if vals is None else np.frombuffer(vals, "<f8").astype(np.float64),
                                None if uses is None else np.frombuffer(uses, "<i4").astype(np.int32), head)
                   for kind, ids, vals, uses, head in db.execute(
                       "SELECT kind, ids, vals, uses, head FROM replay_log ORDER BY seq")]
            return Snapshot(
                meta=meta,
                acked=[(r[0], r[1], r[12]) for r in rows],
                buffer=[(Entry(r[0], r[2], r[1], r[3], r[4], r[5], tuple(json.loads(r[6])), tuple(json.loads(r[7]))),
                         r[8], r[9], r[11]) for r in rows if r[10]],
                replay_log=log,
                policies=db.execute("SELECT version, path, sha256 FROM policies ORDER BY version").fetchall(),
                evaluations=db.execute("SELECT body, request_id FROM evaluations ORDER BY seq").fetchall(),
                tasks=db.execute("SELECT task_id, kind, idx, claims FROM tasks").fetchall(),
                workers=db.execute("SELECT worker_id, kind, name, task_id, restarts, request_id FROM workers")
                .fetchall(),
                replies=db.execute("SELECT worker_id, request_id, body FROM replies").fetchall(),
            )


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


def stored_run_state(path: Path) -> str | None:
    """The run state (running, solved, ...) a journal file holds: how a starting coordinator tells a finished
    run from one to resume. None when there is no file, or nothing was committed to it yet."""
    lifecycle = stored_meta(path, "lifecycle").get("lifecycle")
    return None if lifecycle is None else str(lifecycle["state"])


# ----- statements, one function per kind of row ------------------------------------------------------------
def chunk_row(entry: Entry, base_id: int, initial_leaf: float, worker_id: str, acked_at: float) -> Statement:
    return ("INSERT INTO chunks (chunk_id, sha256, payload_path, transitions, policy_version, num_envs, ends, "
            "fresh, base_id, initial_leaf, in_buffer, worker_id, acked_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
            (entry.chunk_id, entry.sha256, entry.payload_path, entry.transitions, entry.policy_version,
             entry.num_envs, json.dumps(entry.ends), json.dumps(entry.fresh_columns), base_id, initial_leaf,
             worker_id, acked_at))


def chunks_gone(entries: list[Entry], per_statement: int = 500) -> list[Statement]:
    """One statement per `per_statement` chunks (each statement costs the writer a GIL hand-off)."""
    ids = [e.chunk_id for e in entries]
    return [(f"UPDATE chunks SET in_buffer=0 WHERE chunk_id IN ({', '.join(['?'] * len(part))})", tuple(part))
            for part in (ids[i:i + per_statement] for i in range(0, len(ids), per_statement))]


def chunks_forgotten(acked_before: float) -> Statement:
    """Chunks out of the buffer and out of the idempotency window: nothing needs their row any more."""
    return "DELETE FROM chunks WHERE in_buffer=0 AND acked_at < ?", (acked_before,)


def policy_row(version: int, path: str, sha256: str, dropped: list[int]) -> list[Statement]:
    stmts: list[Statement] = [
        ("INSERT OR REPLACE INTO policies (version, path, sha256) VALUES (?, ?, ?)", (version, path, sha256))]
    return stmts + [("DELETE FROM policies WHERE version=?", (v,)) for v in dropped]


def evaluation_row(body: str, request_id: str | None) -> Statement:
    return "INSERT INTO evaluations (body, request_id) VALUES (?, ?)", (body, request_id)


def task_row(task_id: str, kind: str, idx: int, claims: int) -> Statement:
    return ("INSERT OR REPLACE INTO tasks (task_id, kind, idx, claims) VALUES (?, ?, ?, ?)",
            (task_id, kind, idx, claims))


def task_removed(task_id: str) -> Statement:
    return "DELETE FROM tasks WHERE task_id=?", (task_id,)


def worker_row(worker_id: str, kind: str, name: str, task_id: str | None, restarts: int,
               request_id: str | None) -> Statement:
    return ("INSERT OR REPLACE INTO workers (worker_id, kind, name, task_id, restarts, request_id) "
            "VALUES (?, ?, ?, ?, ?, ?)", (worker_id, kind, name, task_id, restarts, request_id))


def worker_removed(worker_id: str) -> list[Statement]:
    return [("DELETE FROM workers WHERE worker_id=?", (worker_id,)),
            ("DELETE FROM replies WHERE worker_id=?", (worker_id,))]


def reply_row(worker_id: str, request_id: str, body: str) -> Statement:
    return ("INSERT OR REPLACE INTO replies (worker_id, request_id, body) VALUES (?, ?, ?)",
            (worker_id, request_id, body))
