"""Group commit and bounded state: many mutations per transaction, failures that fail everything behind them,
an idempotency window instead of every chunk id forever, pruned tasks, and a journal format that is checked."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from coordinator.errors import Conflict
from coordinator.journal.committer import JournalFailed
from coordinator.journal.database import FORMAT, Journal, JournalFormatError
from coordinator.state.dataplane import DataPlane, chunk_row, chunks_forgotten, chunks_gone
from coordinator.state.fleet import Fleet, task_row, worker_row
from coordinator.state.ingest import IngestLedger
from coordinator.state.registry import Worker
from coordinator.state.tasks import TaskQueue, TaskRecord

SCHEMA = "\n".join(t.ddl for t in Fleet.tables + DataPlane.tables)


def _journal(path: Path | None = None) -> Journal:
    """A journal with the tables these statements write (the fleet's and the data plane's)."""
    journal = Journal(path)
    journal.create(Fleet.tables + DataPlane.tables)
    return journal


def _rows(journal: Journal, sql: str) -> list[tuple[object, ...]]:
    journal.committer.drain()
    with journal._lock:
        return journal._db.execute(sql).fetchall()


def test_concurrent_submissions_share_commits_and_all_become_durable(tmp_path: Path) -> None:
    journal = _journal(tmp_path / "j.sqlite")
    futures = []
    lock = threading.Lock()

    def submit(worker: int) -> None:
        for i in range(200):
            row = task_row(TaskRecord(f"t-{worker}-{i}", "collector", i))
            future = journal.submit([row], {"last": [worker, i]})
            with lock:
                futures.append(future)

    threads = [threading.Thread(target=submit, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for future in futures:
        future.result(timeout=10)
    assert _rows(journal, "SELECT COUNT(*) FROM tasks") == [(800,)]
    assert journal.committer.submissions == 800
    assert journal.committer.commits < 800  # grouped: fewer transactions than mutations
    journal.close()


def test_meta_keys_are_coalesced_to_the_last_value_submitted() -> None:
    journal = _journal()
    for i in range(50):
        journal.submit([], {"counter": i})
    assert _rows(journal, "SELECT value FROM meta WHERE key='counter'") == [(json.dumps(49),)]


def test_a_failed_commit_fails_its_group_and_everything_behind_it_until_cleared() -> None:
    journal = _journal()
    journal.submit([task_row(TaskRecord("ok", "collector", 0))]).result(timeout=5)
    bad = journal.submit([("INSERT INTO no_such_table VALUES (1)", ())])
    with pytest.raises(JournalFailed):
        bad.result(timeout=5)
    behind = journal.submit([task_row(TaskRecord("later", "collector", 1))])
    with pytest.raises(JournalFailed):
        behind.result(timeout=5)
    assert journal.committer.failure is not None
    journal.committer.clear()
    journal.submit([task_row(TaskRecord("after", "collector", 2))]).result(timeout=5)
    assert sorted(r[0] for r in _rows(journal, "SELECT task_id FROM tasks")) == ["after", "ok"]


def test_a_journal_of_another_format_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('journal_format', ?)", (json.dumps(FORMAT - 1),))
    db.commit()
    db.close()
    with pytest.raises(JournalFormatError, match="start a new run"):
        Journal(path)


def test_the_ledger_remembers_ids_for_its_window_and_refuses_reused_ids_with_other_content() -> None:
    ledger = IngestLedger(window_seconds=100.0, max_ids=1_000)
    ledger.add("a", "1" * 64, acked_at=0.0)
    ledger.add("b", "2" * 64, acked_at=50.0)
    assert ledger.seen("a", "1" * 64)
    with pytest.raises(Conflict):
        ledger.seen("a", "3" * 64)
    assert ledger.expire(now=120.0) == 20.0
    assert "a" not in ledger and "b" in ledger
    assert not ledger.seen("a", "1" * 64)


def test_the_ledger_is_capped_however_fast_chunks_arrive() -> None:
    ledger = IngestLedger(window_seconds=1e9, max_ids=10)
    for i in range(25):
        ledger.add(f"c{i}", "0" * 64, acked_at=float(i))
    assert len(ledger) == 10 and "c24" in ledger and "c14" not in ledger


def test_rows_of_chunks_out_of_the_buffer_and_the_window_are_deleted() -> None:
    from coordinator.replay.buffer import Entry

    journal = _journal()
    old = Entry("old", "chunks/t/old.msgpack", "0" * 64, 4, 0)
    new = Entry("new", "chunks/t/new.msgpack", "1" * 64, 4, 0)
    journal.submit([chunk_row(old, 0, 1.0, "w", acked_at=10.0), chunk_row(new, 4, 1.0, "w", acked_at=90.0)])
    journal.submit(chunks_gone([old, new]))
    journal.submit([chunks_forgotten(acked_before=50.0)])
    assert _rows(journal, "SELECT chunk_id FROM chunks") == [("new",)]


def test_pending_collector_tasks_idle_past_the_cutoff_are_pruned_and_indices_never_reused() -> None:
    tasks = TaskQueue()
    held = [tasks.claim("collector", f"w{i}", create_if_empty=True, now=0.0) for i in range(3)]
    for task in held:
        assert task is not None
    tasks.release("collector-1", now=5.0)
    tasks.release("collector-2", now=50.0)
    assert tasks.prune("collector", idle_before=20.0) == ["collector-1"]
    again = tasks.claim("collector", "w9", create_if_empty=True, now=60.0)
    assert again is not None and again.task_id == "collector-2"  # the remaining pending one, lowest index first
    fresh = tasks.claim("collector", "w10", create_if_empty=True, now=60.0)
    assert fresh is not None and fresh.task_id == "collector-3"  # index 1 is gone for good: seeds never repeat


def test_a_request_that_goes_away_cannot_cancel_the_commit_its_group_shares() -> None:
    journal = _journal()
    future = journal.submit([task_row(TaskRecord("t", "collector", 0))])
    assert future.cancel() is False  # asyncio.wrap_future cancels its source when the awaiting task is cancelled
    future.result(timeout=5)
    assert _rows(journal, "SELECT task_id FROM tasks") == [("t",)]


def test_actions_after_a_commit_run_before_its_waiters_are_released_and_never_after_a_failure() -> None:
    journal = _journal()
    done: list[str] = []
    journal.submit([], {"k": 1}, after=lambda: done.append("ok")).result(timeout=5)
    assert done == ["ok"]
    failed = journal.submit([("INSERT INTO no_such_table VALUES (1)", ())], after=lambda: done.append("bad"))
    with pytest.raises(JournalFailed):
        failed.result(timeout=5)
    assert done == ["ok"]


def _apply(statements: list[tuple[str, tuple[object, ...]]]) -> list[list[tuple[object, ...]]]:
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    for sql, args in statements:
        db.execute(sql, args)
    return [db.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall() for table in ("chunks", "tasks", "workers")]


def test_merged_statements_have_the_same_effect_in_fewer_executions() -> None:
    from coordinator.journal.committer import merged
    from coordinator.replay.buffer import Entry

    entries = [Entry(f"c{i:04d}", f"chunks/t/c{i:04d}.msgpack", f"{i:064x}", 8, 0, 2, (1, 5), (0,)) for i in range(40)]
    statements = [chunk_row(e, 8 * i, 1.0, "w", 1.5) for i, e in enumerate(entries[:25])]
    statements += [task_row(TaskRecord("t-1", "collector", 1)),
                   task_row(TaskRecord("t-1", "collector", 1, claims=1))]  # order matters
    statements += chunks_gone(entries[:7], per_statement=3)
    statements += [worker_row(Worker("w", "collector", "host", 0.0, 0.0, task_id="t-1"))]
    statements += [chunk_row(e, 8 * i, 1.0, "w", 1.5) for i, e in enumerate(entries[25:])]
    statements += [("DELETE FROM workers WHERE worker_id=?", ("w",)), ("DELETE FROM tasks WHERE task_id=?", ("x",))]
    out = merged(statements)
    assert _apply(out) == _apply(statements)
    # 25 chunk rows -> 1, two task rows -> 1, 7 gone in 3s -> 3, a worker row, 15 chunk rows -> 1, two deletes
    assert len(out) == 1 + 1 + 3 + 1 + 1 + 2
    tasks = _apply(out)[1]
    assert tasks == [("t-1", "collector", 1, 1)]  # the later INSERT OR REPLACE still wins


def test_merged_keeps_each_statement_under_the_bound_parameter_limit() -> None:
    from coordinator.journal.committer import _MAX_PARAMS, merged

    statements = [task_row(TaskRecord(f"t-{i}", "collector", i)) for i in range(20_000)]
    out = merged(statements)
    assert all(len(args) <= _MAX_PARAMS for _, args in out) and len(out) == -(-20_000 * 4 // _MAX_PARAMS)
    assert _apply(out) == _apply(statements)
