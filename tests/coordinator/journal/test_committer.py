"""Group commit: many mutations per transaction, each waiter released only once its own commit is durable,
failures that fail everything behind them, and merged statements with the same effect in fewer executions."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from rlfleet.coordinator.journal.committer import JournalFailed
from rlfleet.coordinator.journal.database import Journal
from rlfleet.coordinator.state.dataplane import DataPlane, chunk_row, chunks_gone
from rlfleet.coordinator.state.fleet import Fleet, task_row, worker_row
from rlfleet.coordinator.state.registry import Worker
from rlfleet.coordinator.state.tasks import TaskRecord
from tests.support.journal import journal_with, rows

SCHEMA = "\n".join(t.ddl for t in Fleet.tables + DataPlane.tables)


def _journal(path: Path | None = None) -> Journal:
    """A journal with the tables these statements write (the fleet's and the data plane's)."""
    return journal_with(Fleet.tables + DataPlane.tables, path)


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
    assert rows(journal, "SELECT COUNT(*) FROM tasks") == [(800,)]
    assert journal.committer.submissions == 800
    assert journal.committer.commits < 800  # grouped: fewer transactions than mutations
    journal.close()


def test_meta_keys_are_coalesced_to_the_last_value_submitted() -> None:
    journal = _journal()
    for i in range(50):
        journal.submit([], {"counter": i})
    assert rows(journal, "SELECT value FROM meta WHERE key='counter'") == [(json.dumps(49),)]


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
    assert sorted(r[0] for r in rows(journal, "SELECT task_id FROM tasks")) == ["after", "ok"]


def test_a_request_that_goes_away_cannot_cancel_the_commit_its_group_shares() -> None:
    journal = _journal()
    future = journal.submit([task_row(TaskRecord("t", "collector", 0))])
    assert future.cancel() is False  # asyncio.wrap_future cancels its source when the awaiting task is cancelled
    future.result(timeout=5)
    assert rows(journal, "SELECT task_id FROM tasks") == [("t",)]


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
    from rlfleet.coordinator.journal.committer import merged
    from rlfleet.coordinator.replay.buffer import Entry

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
    from rlfleet.coordinator.journal.committer import _MAX_PARAMS, merged

    statements = [task_row(TaskRecord(f"t-{i}", "collector", i)) for i in range(20_000)]
    out = merged(statements)
    assert all(len(args) <= _MAX_PARAMS for _, args in out) and len(out) == -(-20_000 * 4 // _MAX_PARAMS)
    assert _apply(out) == _apply(statements)
