"""coordinator.state.fleet.Fleet without a Run: who may act for whom, idempotent registration, the cap on live
workers, claims, expiry, what each change marks, and its workers and tasks through a real journal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rlfleet.coordinator.errors import Forbidden, GroupFull, TooManyWorkers, UnknownWorker
from rlfleet.coordinator.journal.component import Stored
from rlfleet.coordinator.state.fleet import FLAG_AFTER_CORRUPT, Fleet
from tests.support.components import JournalFor

LEASE = 10.0


def fleet(**options: int) -> Fleet:
    made = Fleet(LEASE, max_workers=options.pop("max_workers", 100), task_idle_seconds=60.0, **options)
    made.create_singletons()
    return made


# ----- rules ---------------------------------------------------------------------------------------------------
def test_a_new_run_has_one_task_per_learner_rank_and_an_evaluator_task() -> None:
    assert sorted(fleet(learners=2).tasks.tasks) == ["evaluator-0", "learner-0", "learner-1"]


def test_a_retried_registration_gets_the_same_worker_and_another_kind_is_refused() -> None:
    f = fleet()
    first = f.register("collector", "host", 0, "req-1", now=0.0)
    assert f.register("collector", "host", 0, "req-1", now=1.0) is first and len(f.registry.workers) == 1
    with pytest.raises(Forbidden, match="already registered a collector"):
        f.register("learner", "host", 0, "req-1", now=1.0)


def test_the_fleet_is_capped_and_says_how_to_raise_the_cap() -> None:
    f = fleet(max_workers=1)
    f.register("collector", "a", 0, None, now=0.0)
    with pytest.raises(TooManyWorkers, match="RLFLEET_MAX_WORKERS"):
        f.register("collector", "b", 0, None, now=0.0)


def test_a_worker_acts_only_for_itself_within_its_tokens_scope() -> None:
    f = fleet()
    collector = f.register("collector", "host", 0, None, now=0.0)
    with pytest.raises(UnknownWorker, match="register again"):
        f.worker("collector-99-000000", now=0.0)
    with pytest.raises(Forbidden, match="'learner' token cannot act"):
        f.worker(collector.worker_id, now=0.0, scope="learner")
    with pytest.raises(Forbidden, match="this endpoint is for learners"):
        f.worker(collector.worker_id, now=0.0, kind="learner")
    assert f.worker(collector.worker_id, now=5.0, kind="collector", scope="collector").lease_expires == 5.0 + LEASE


def test_a_claim_holds_one_task_and_a_full_learner_group_is_refused() -> None:
    f = fleet(learners=2)
    ranks = [f.register("learner", f"l{i}", 0, None, now=0.0) for i in range(3)]
    first = f.claim(ranks[0], now=0.0)
    assert first is not None and f.claim(ranks[0], now=1.0) is first
    assert f.claim(ranks[1], now=0.0) is not None
    with pytest.raises(GroupFull, match="learner.replicas is 2"):
        f.claim(ranks[2], now=0.0)


def test_a_deterministic_run_makes_one_collector_task_whoever_asks() -> None:
    f = fleet(max_collector_tasks=1)
    a, b = (f.register("collector", name, 0, None, now=0.0) for name in "ab")
    assert f.claim(a, now=0.0) is not None and f.claim(b, now=0.0) is None


def test_expired_workers_return_their_tasks_and_long_idle_collector_tasks_go() -> None:
    f = fleet()
    worker = f.register("collector", "host", 0, None, now=0.0)
    f.claim(worker, now=0.0)
    assert f.expire(now=LEASE) == [worker.worker_id] and not f.alive(worker.worker_id)
    assert f.tasks.tasks["collector-0"].state == "pending"
    f.expire(now=LEASE + 61.0)
    assert "collector-0" not in f.tasks.tasks and "learner-0" in f.tasks.tasks  # singletons are never pruned


def test_a_worker_is_flagged_after_repeated_corrupt_payloads() -> None:
    f = fleet()
    worker = f.register("collector", "host", 0, None, now=0.0)
    assert [f.note_corrupt(worker.worker_id) for _ in range(FLAG_AFTER_CORRUPT)] == [False, False, True]
    assert f.flagged(worker) and not f.note_corrupt("collector-99-000000")


# ----- what each change marks ----------------------------------------------------------------------------------
def test_registration_and_claims_mark_their_rows() -> None:
    f = Fleet(LEASE, 100, 60.0)
    f.create_singletons()
    assert f.pending.dirty and [args[0] for _, args in f.pending.rows] == ["learner-0", "evaluator-0"]
    f.pending.clear()
    worker = f.register("collector", "host", 0, "req-1", now=0.0)
    assert [args[0] for _, args in f.pending.rows] == [worker.worker_id]
    f.pending.clear()
    f.claim(worker, now=0.0)
    assert [args[0] for _, args in f.pending.rows] == ["collector-0", worker.worker_id]


def test_expiry_marks_deletions_and_nothing_when_nothing_expired() -> None:
    f = fleet()
    worker = f.register("collector", "host", 0, None, now=0.0)
    f.claim(worker, now=0.0)
    f.pending.clear()
    f.expire(now=1.0)
    assert not f.pending.dirty
    f.expire(now=LEASE)
    assert [sql.split()[2] for sql, _ in f.pending.rows] == ["workers"]
    f.pending.clear()
    f.expire(now=LEASE + 61.0)  # its task, pending since the worker expired, has idled past the cut-off
    assert [sql.split()[2] for sql, _ in f.pending.rows] == ["tasks"]


def test_reading_renewing_and_retried_registrations_mark_nothing() -> None:
    f = fleet()
    worker = f.register("collector", "host", 0, "req-1", now=0.0)
    f.claim(worker, now=0.0)
    f.pending.clear()
    f.register("collector", "host", 0, "req-1", now=1.0)
    f.worker(worker.worker_id, now=2.0)
    f.claim(worker, now=2.0)  # already holds its task
    f.worker_status(2.0, {})
    f.task_status()
    f.learner_ranks(2.0)
    assert not f.pending.dirty and f.pending.rows == []


# ----- persistence ---------------------------------------------------------------------------------------------
def test_workers_tasks_and_counters_survive_a_round_trip(tmp_path: Path) -> None:
    f = fleet()
    journal = JournalFor(tmp_path / "journal.sqlite", f)
    gone = f.register("collector", "gone", 0, None, now=0.0)
    f.claim(gone, now=0.0)
    collector = f.register("collector", "box", 2, "req-1", now=5.0)
    learner = f.register("learner", "gpu", 0, None, now=5.0)
    f.claim(collector, now=5.0)
    f.claim(learner, now=5.0)
    f.note_corrupt(collector.worker_id)
    journal.commit()
    f.expire(now=LEASE)  # `gone` leaves; its task is pending again
    journal.commit()
    late = f.register("collector", "late", 0, None, now=12.0)
    assert f.claim(late, now=12.0) is f.tasks.tasks["collector-0"]  # claimed a second time
    journal.commit()

    restored = journal.restore(Fleet(LEASE, 100, 60.0), now=100.0)
    assert restored.state_dict() == f.state_dict()
    assert set(restored.registry.workers) == {collector.worker_id, learner.worker_id, late.worker_id}
    assert {(w.worker_id, w.kind, w.name, w.task_id, w.restarts, w.request_id, w.corrupt_chunks)
            for w in restored.registry.workers.values()} == {
        (w.worker_id, w.kind, w.name, w.task_id, w.restarts, w.request_id, w.corrupt_chunks)
        for w in f.registry.workers.values()}
    assert {(t.task_id, t.state, t.worker_id, t.claims) for t in restored.task_status()} == {
        (t.task_id, t.state, t.worker_id, t.claims) for t in f.task_status()}
    assert all(w.lease_expires == 100.0 + LEASE for w in restored.registry.workers.values())  # a fresh lease
    assert restored.register("collector", "box", 2, "req-1", now=100.0) is restored.registry.workers[
        collector.worker_id]  # a registration retried across the restart


def test_restored_ids_keep_counting() -> None:
    f = fleet()
    f.register("collector", "a", 0, None, now=0.0)
    f.claim(f.register("collector", "b", 0, None, now=0.0), now=0.0)
    rows = {"tasks": [("collector-4", "collector", 4, 1), ("learner-0", "learner", 0, 1)], "workers": []}
    restored = Fleet(LEASE, 100, 60.0)
    restored.load_state_dict(Stored(f.state_dict(), rows), now=0.0)
    worker = restored.register("collector", "c", 0, None, now=0.0)
    assert worker.worker_id.startswith("collector-3-")
    restored.claim(worker, now=0.0)
    assert worker.task_id == "collector-4"  # the pending restored task comes first
    fresh = restored.claim(restored.register("collector", "d", 0, None, now=0.0), now=0.0)
    assert fresh is not None and fresh.task_id == "collector-5"


def test_a_journal_from_before_corrupt_counts_loads_with_none_flagged() -> None:
    rows: dict[str, list[tuple[Any, ...]]] = {
        "tasks": [("collector-0", "collector", 0, 1)],
        "workers": [("collector-1-abcdef", "collector", "box", "collector-0", 0, None)]}
    restored = Fleet(LEASE, 100, 60.0)
    restored.load_state_dict(Stored({"worker_counter": 1}, rows), now=0.0)
    worker = restored.registry.workers["collector-1-abcdef"]
    assert worker.corrupt_chunks == 0 and not restored.flagged(worker)
    assert restored.tasks.tasks["collector-0"].worker_id == "collector-1-abcdef"
