"""coordinator.state.tasks.TaskQueue: claims prefer the lowest pending index; collectors get tasks on demand."""

from __future__ import annotations

import pytest

from rlfleet.coordinator.state.tasks import TaskQueue
from rlfleet.shared.wire import WorkerKind


def claim_id(q: TaskQueue, kind: WorkerKind, worker_id: str, create: bool = True) -> str | None:
    task = q.claim(kind, worker_id, create_if_empty=create)
    return None if task is None else task.task_id


def test_create_numbers_tasks_per_kind() -> None:
    q = TaskQueue()
    assert q.create("learner").task_id == "learner-0"
    assert q.create("collector").task_id == "collector-0"
    c1 = q.create("collector")
    assert (c1.task_id, c1.kind, c1.index, c1.state, c1.worker_id, c1.claims) == (
        "collector-1", "collector", 1, "pending", None, 0)
    assert q.create("learner").task_id == "learner-1"
    assert set(q.tasks) == {"learner-0", "learner-1", "collector-0", "collector-1"}


def test_claim_marks_task_and_counts_claims() -> None:
    q = TaskQueue()
    q.create("learner")
    task = q.claim("learner", "w1", create_if_empty=False)
    assert task is not None
    assert (task.task_id, task.state, task.worker_id, task.claims) == ("learner-0", "claimed", "w1", 1)
    assert q.claim("learner", "w2", create_if_empty=False) is None  # one learner task per run
    q.release("learner-0")
    assert (task.state, task.worker_id) == ("pending", None)
    again = q.claim("learner", "w2", create_if_empty=False)
    assert again is task
    assert (again.worker_id, again.claims) == ("w2", 2)


def test_claims_prefer_lowest_pending_index() -> None:
    q = TaskQueue()
    for i in range(4):
        assert claim_id(q, "collector", f"w{i}") == f"collector-{i}"
    q.release("collector-3")
    q.release("collector-1")
    q.release("collector-2")
    assert claim_id(q, "collector", "a") == "collector-1"
    assert claim_id(q, "collector", "b") == "collector-2"
    assert claim_id(q, "collector", "c") == "collector-3"
    # nothing pending any more: a new one is created rather than stealing a claimed task
    assert claim_id(q, "collector", "d") == "collector-4"
    assert q.tasks["collector-0"].worker_id == "w0"


def test_on_demand_creation_only_when_asked() -> None:
    q = TaskQueue()
    assert q.claim("evaluator", "e1", create_if_empty=False) is None
    assert q.tasks == {}  # nothing created
    assert q.claim("collector", "c1", create_if_empty=True) is not None
    assert list(q.tasks) == ["collector-0"]


def test_claim_only_considers_the_requested_kind() -> None:
    q = TaskQueue()
    q.create("learner")
    q.create("evaluator")
    assert q.claim("collector", "c1", create_if_empty=False) is None
    ev = q.claim("evaluator", "e1", create_if_empty=False)
    assert ev is not None and ev.task_id == "evaluator-0"
    assert q.tasks["learner-0"].state == "pending"


def test_release_unknown_task_raises() -> None:
    with pytest.raises(KeyError):
        TaskQueue().release("collector-7")


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
