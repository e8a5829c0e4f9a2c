"""SQLite (WAL) journal of the coordinator's state, so a restarted coordinator continues the same run.

`Run` writes here inside the critical section of each mutation, one transaction per mutation, so what a
client saw acknowledged is on disk before the reply leaves. WAL with synchronous=NORMAL survives a
killed process (kill -9) without losing committed transactions; synchronous=FULL (setting `db_synchronous`)
also survives power loss at the cost of an fsync per acknowledged chunk.

Tables: `meta` (counters, run state, limiter, learner progress, config), `chunks` (every acknowledged id,
with whether and in what order it is still in the buffer), `policies`, `evaluations`, `tasks`, `workers`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator.buffer import Entry

Statement = tuple[str, tuple[Any, ...]]
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, chunk_id TEXT UNIQUE NOT NULL, sha256 TEXT NOT NULL,
    payload_path TEXT NOT NULL, transitions INTEGER NOT NULL, policy_version INTEGER NOT NULL,
    in_buffer INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_in_buffer ON chunks (in_buffer, seq);
CREATE TABLE IF NOT EXISTS policies (version INTEGER PRIMARY KEY, path TEXT NOT NULL, sha256 TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS evaluations (seq INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (task_id TEXT PRIMARY KEY, kind TEXT NOT NULL, idx INTEGER NOT NULL,
    claims INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS workers (worker_id TEXT PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL,
    task_id TEXT, restarts INTEGER NOT NULL DEFAULT 0);
"""


@dataclass
class Snapshot:
    """Everything a restarted coordinator needs, as read back from the journal."""

    meta: dict[str, Any]
    chunk_hashes: dict[str, str]
    buffer: list[Entry]
    policies: list[tuple[int, str, str]]
    evaluations: list[str]
    tasks: list[tuple[str, str, int, int]]
    workers: list[tuple[str, str, str, str | None, int]] = field(default_factory=list)


class Journal:
    def __init__(self, path: Path | None, synchronous: str = "NORMAL") -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"db_synchronous must be NORMAL or FULL, got {synchronous!r}")
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path) if path else ":memory:", check_same_thread=False,
                                   isolation_level=None)
        self._lock = threading.Lock()  # Run already serialises writers; this guards direct readers too
        if path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _tx(self, statements: list[Statement]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in statements:
                    self._db.execute(sql, args)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    @staticmethod
    def _meta(meta: dict[str, Any]) -> list[Statement]:
        return [("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                 (k, json.dumps(v))) for k, v in meta.items()]

    # ----- writes ------------------------------------------------------------------------------------------
    def save_meta(self, meta: dict[str, Any]) -> None:
        self._tx(self._meta(meta))

    def save_chunk(self, entry: Entry, evicted: list[Entry], meta: dict[str, Any]) -> None:
        stmts: list[Statement] = [(
            "INSERT INTO chunks (chunk_id, sha256, payload_path, transitions, policy_version, in_buffer) "
            "VALUES (?, ?, ?, ?, ?, 1)",
            (entry.chunk_id, entry.sha256, entry.payload_path, entry.transitions, entry.policy_version))]
        stmts += [("UPDATE chunks SET in_buffer=0 WHERE chunk_id=?", (e.chunk_id,)) for e in evicted]
        self._tx(stmts + self._meta(meta))

    def save_policy(self, version: int, path: str, sha256: str, dropped: list[int], meta: dict[str, Any]) -> None:
        stmts: list[Statement] = [
            ("INSERT OR REPLACE INTO policies (version, path, sha256) VALUES (?, ?, ?)", (version, path, sha256))]
        stmts += [("DELETE FROM policies WHERE version=?", (v,)) for v in dropped]
        self._tx(stmts + self._meta(meta))

    def save_evaluation(self, body: str, meta: dict[str, Any]) -> None:
        self._tx([("INSERT INTO evaluations (body) VALUES (?)", (body,))] + self._meta(meta))

    def save_task(self, task_id: str, kind: str, idx: int, claims: int) -> None:
        self._tx([("INSERT OR REPLACE INTO tasks (task_id, kind, idx, claims) VALUES (?, ?, ?, ?)",
                   (task_id, kind, idx, claims))])

    def save_worker(self, worker_id: str, kind: str, name: str, task_id: str | None, restarts: int) -> None:
        self._tx([("INSERT OR REPLACE INTO workers (worker_id, kind, name, task_id, restarts) VALUES (?, ?, ?, ?, ?)",
                   (worker_id, kind, name, task_id, restarts))])

    def remove_workers(self, worker_ids: list[str]) -> None:
        if worker_ids:
            self._tx([("DELETE FROM workers WHERE worker_id=?", (w,)) for w in worker_ids])

    # ----- reads -------------------------------------------------------------------------------------------
    def load(self) -> Snapshot | None:
        """The journalled state, or None for a new run."""
        with self._lock:
            meta = {k: json.loads(v) for k, v in self._db.execute("SELECT key, value FROM meta")}
            if not meta:
                return None
            rows = self._db.execute("SELECT chunk_id, sha256, payload_path, transitions, policy_version, in_buffer "
                                    "FROM chunks ORDER BY seq").fetchall()
            return Snapshot(
                meta=meta,
                chunk_hashes={r[0]: r[1] for r in rows},
                buffer=[Entry(r[0], r[2], r[1], r[3], r[4]) for r in rows if r[5]],
                policies=self._db.execute("SELECT version, path, sha256 FROM policies ORDER BY version").fetchall(),
                evaluations=[r[0] for r in self._db.execute("SELECT body FROM evaluations ORDER BY seq")],
                tasks=self._db.execute("SELECT task_id, kind, idx, claims FROM tasks").fetchall(),
                workers=self._db.execute("SELECT worker_id, kind, name, task_id, restarts FROM workers").fetchall(),
            )
