"""SQLite (WAL) journal of the coordinator's state, so a restarted coordinator continues the same run.

`Run` writes here inside the critical section of each mutation, one transaction per mutation, so what a
client saw acknowledged is on disk before the reply leaves. WAL with synchronous=NORMAL survives a
killed process (kill -9) without losing committed transactions; synchronous=FULL (setting `db_synchronous`)
also survives power loss at the cost of an fsync per acknowledged chunk.

Tables: `meta` (counters, run state, limiter, learner progress, config), `chunks` (every acknowledged id,
with its ring position, initial priority and whether it is still in the buffer), `replay_log` (priority
updates and counted draws since the last buffer snapshot, binary arrays in order; compacted into one
snapshot row now and then), `policies`, `evaluations`, `tasks`, `workers`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from coordinator.replay.buffer import Entry

Statement = tuple[str, tuple[Any, ...]]
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, chunk_id TEXT UNIQUE NOT NULL, sha256 TEXT NOT NULL,
    payload_path TEXT NOT NULL, transitions INTEGER NOT NULL, policy_version INTEGER NOT NULL,
    num_envs INTEGER NOT NULL, ends TEXT NOT NULL, fresh TEXT NOT NULL, base_id INTEGER NOT NULL,
    initial_leaf REAL NOT NULL, in_buffer INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS replay_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,
    ids BLOB NOT NULL, vals BLOB, uses BLOB, head INTEGER);
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
    buffer: list[tuple[Entry, int, float]]  # (entry, base row id, initial sum-tree leaf) in insertion order
    policies: list[tuple[int, str, str]]
    evaluations: list[str]
    tasks: list[tuple[str, str, int, int]]
    workers: list[tuple[str, str, str, str | None, int]] = field(default_factory=list)
    replay_log: list[ReplayRecord] = field(default_factory=list)


@dataclass
class ReplayRecord:
    """One buffer event since the last snapshot: 'priority' (ids, priorities), 'use' (drawn ids) or 'snapshot'
    (ids, sum-tree leaves, uses of every live item when the next row id was `head`)."""

    kind: str
    ids: np.ndarray
    values: np.ndarray | None = None
    uses: np.ndarray | None = None
    head: int | None = None


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
        self._replay_records = int(self._db.execute("SELECT COUNT(*) FROM replay_log").fetchone()[0])

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

    @staticmethod
    def _gone(entries: list[Entry]) -> list[Statement]:
        return [("UPDATE chunks SET in_buffer=0 WHERE chunk_id=?", (e.chunk_id,)) for e in entries]

    def save_chunk(self, entry: Entry, base_id: int, initial_leaf: float, gone: list[Entry],
                   meta: dict[str, Any]) -> None:
        """An acknowledged chunk; `gone` may include the chunk itself (nothing in it could be served)."""
        stmts: list[Statement] = [(
            "INSERT INTO chunks (chunk_id, sha256, payload_path, transitions, policy_version, num_envs, ends, "
            "fresh, base_id, initial_leaf, in_buffer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
            (entry.chunk_id, entry.sha256, entry.payload_path, entry.transitions, entry.policy_version,
             entry.num_envs, json.dumps(entry.ends), json.dumps(entry.fresh_columns), base_id, initial_leaf))]
        self._tx(stmts + self._gone(gone) + self._meta(meta))

    def drop_chunks(self, gone: list[Entry], meta: dict[str, Any]) -> None:
        self._tx(self._gone(gone) + self._meta(meta))

    def save_replay(self, record: ReplayRecord, gone: list[Entry], meta: dict[str, Any]) -> None:
        """Append a buffer event; a snapshot replaces every earlier event."""
        stmts: list[Statement] = [("DELETE FROM replay_log", ())] if record.kind == "snapshot" else []
        stmts.append(("INSERT INTO replay_log (kind, ids, vals, uses, head) VALUES (?, ?, ?, ?, ?)", (
            record.kind, record.ids.astype("<i8").tobytes(),
            None if record.values is None else record.values.astype("<f8").tobytes(),
            None if record.uses is None else record.uses.astype("<i4").tobytes(), record.head)))
        self._tx(stmts + self._gone(gone) + self._meta(meta))
        self._replay_records = 1 if record.kind == "snapshot" else self._replay_records + 1

    def replay_log_length(self) -> int:
        """Records in `replay_log`: counted once on open, then as they are written (no query per tick)."""
        return self._replay_records

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
            rows = self._db.execute(
                "SELECT chunk_id, sha256, payload_path, transitions, policy_version, num_envs, ends, fresh, "
                "base_id, initial_leaf, in_buffer FROM chunks ORDER BY seq").fetchall()
            log = [ReplayRecord(kind, np.frombuffer(ids, "<i8").astype(np.int64),
                                None if vals is None else np.frombuffer(vals, "<f8").astype(np.float64),
                                None if uses is None else np.frombuffer(uses, "<i4").astype(np.int32), head)
                   for kind, ids, vals, uses, head in self._db.execute(
                       "SELECT kind, ids, vals, uses, head FROM replay_log ORDER BY seq")]
            return Snapshot(
                meta=meta,
                chunk_hashes={r[0]: r[1] for r in rows},
                buffer=[(Entry(r[0], r[2], r[1], r[3], r[4], r[5], tuple(json.loads(r[6])), tuple(json.loads(r[7]))),
                         r[8], r[9]) for r in rows if r[10]],
                replay_log=log,
                policies=self._db.execute("SELECT version, path, sha256 FROM policies ORDER BY version").fetchall(),
                evaluations=[r[0] for r in self._db.execute("SELECT body FROM evaluations ORDER BY seq")],
                tasks=self._db.execute("SELECT task_id, kind, idx, claims FROM tasks").fetchall(),
                workers=self._db.execute("SELECT worker_id, kind, name, task_id, restarts FROM workers").fetchall(),
            )
