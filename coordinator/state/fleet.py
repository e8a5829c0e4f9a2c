"""The fleet: registered workers, their leases and the tasks they hold.

Owns who may act for whom (a token's scope against a worker's kind), registration idempotency (a retried
registration gets the same worker back, never a phantom), the cap on live workers, lease expiry (returning
tasks) and pruning of long-idle collector tasks. It persists itself: the `workers` and `tasks` tables, and its
counters under the meta key `fleet`. Leases are not journalled: a restarted coordinator gives every known worker
a fresh one to reconnect within.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rlfleet.coordinator.errors import Forbidden, GroupFull, TooManyWorkers, UnknownWorker
from rlfleet.coordinator.journal.committer import Statement
from rlfleet.coordinator.journal.component import Pending, Stored, Table
from rlfleet.coordinator.state.registry import Registry, Worker
from rlfleet.coordinator.state.tasks import TaskQueue, TaskRecord
from rlfleet.shared.wire import LearnerRank, TaskStatus, WorkerKind, WorkerStatus

FLAG_AFTER_CORRUPT = 3  # a worker whose payloads were found corrupt this often may report no more chunks


class Fleet:
    key: ClassVar[str] = "fleet"
    tables: ClassVar[tuple[Table, ...]] = (
        Table("tasks", "CREATE TABLE IF NOT EXISTS tasks (task_id TEXT PRIMARY KEY, kind TEXT NOT NULL, "
              "idx INTEGER NOT NULL, claims INTEGER NOT NULL);",
              "SELECT task_id, kind, idx, claims FROM tasks"),
        Table("workers", "CREATE TABLE IF NOT EXISTS workers (worker_id TEXT PRIMARY KEY, kind TEXT NOT NULL, "
              "name TEXT NOT NULL, task_id TEXT, restarts INTEGER NOT NULL DEFAULT 0, request_id TEXT);",
              "SELECT worker_id, kind, name, task_id, restarts, request_id FROM workers"),
    )

    def __init__(self, lease_seconds: float, max_workers: int, task_idle_seconds: float,
                 max_collector_tasks: int | None = None, learners: int = 1) -> None:
        self.max_collector_tasks = max_collector_tasks  # deterministic runs: one collector, whoever it is
        self.learners = learners  # learner.replicas: one learner task per rank of the group
        self.registry = Registry(lease_seconds)
        self.tasks = TaskQueue()
        self.max_workers = max_workers
        self.task_idle_seconds = task_idle_seconds
        self.pending = Pending()

    @property
    def lease_seconds(self) -> float:
        return self.registry.lease_seconds

    def alive(self, worker_id: str) -> bool:
        """Whether the worker still holds a lease (an expired one has been removed)."""
        return self.registry.get(worker_id) is not None

    def create_singletons(self) -> None:
        """A new run's learner tasks (one per rank of the learner group) and evaluator task (collector tasks come
        on demand)."""
        kinds: list[WorkerKind] = [*["learner"] * self.learners, "evaluator"]  # type: ignore[list-item]
        self.pending.mark([task_row(self.tasks.create(kind)) for kind in kinds])

    # ----- workers -----------------------------------------------------------------------------------------
    def register(self, kind: WorkerKind, name: str, restarts: int, request_id: str | None,
                 now: float, last_error: str | None = None) -> Worker:
        known = self.registry.by_request.get(request_id) if request_id else None
        if known is not None and known in self.registry.workers:
            worker = self.registry.workers[known]
            if worker.kind != kind:
                raise Forbidden(f"request id {request_id!r} already registered a {worker.kind}")
            self.registry.renew(worker, now)
            return worker
        if len(self.registry.workers) >= self.max_workers:
            raise TooManyWorkers(f"the fleet is full ({self.max_workers} live workers, RLFLEET_MAX_WORKERS); "
                                 "retry once workers leave, or raise the limit")
        worker = self.registry.register(kind, name, now, restarts, request_id)
        worker.last_error = last_error
        self.pending.mark([worker_row(worker)])
        return worker

    def worker(self, worker_id: str, now: float, kind: WorkerKind | None = None, scope: str = "admin") -> Worker:
        """The worker acting in this request, lease renewed; refuses unknown ids and foreign scopes."""
        worker = self.registry.get(worker_id)
        if worker is None:
            raise UnknownWorker(f"worker {worker_id!r} is not registered (lease expired?); register again")
        if scope != "admin" and worker.kind != scope:
            raise Forbidden(f"a {scope!r} token cannot act for {worker.kind} {worker_id!r}")
        if kind is not None and worker.kind != kind:
            raise Forbidden(f"worker {worker_id!r} is a {worker.kind}; this endpoint is for {kind}s")
        self.registry.renew(worker, now)
        return worker

    def claim(self, worker: Worker, now: float) -> TaskRecord | None:
        if worker.task_id is not None:
            return self.tasks.tasks[worker.task_id]
        more = self.max_collector_tasks is None or self.tasks.created("collector") < self.max_collector_tasks
        task = self.tasks.claim(worker.kind, worker.worker_id, create_if_empty=worker.kind == "collector" and more,
                                now=now)
        if task is None:
            if worker.kind == "learner" and self.learners > 1:
                held = ", ".join(f"{t.task_id} by {t.worker_id}" for t in self.learner_tasks())
                raise GroupFull(f"learner.replicas is {self.learners} and every learner task is held ({held}): "
                                f"a learner group takes no more ranks")
            return None
        worker.task_id = task.task_id
        self.pending.mark([task_row(task), worker_row(worker)])
        return task

    def note_corrupt(self, worker_id: str) -> bool:
        """Count a corrupt payload against the worker that reported it; True if it is now flagged."""
        worker = self.registry.get(worker_id)
        if worker is None:
            return False
        worker.corrupt_chunks += 1
        self.pending.mark()
        return worker.corrupt_chunks >= FLAG_AFTER_CORRUPT

    @staticmethod
    def flagged(worker: Worker) -> bool:
        return worker.corrupt_chunks >= FLAG_AFTER_CORRUPT

    # ----- housekeeping ------------------------------------------------------------------------------------
    def expire(self, now: float) -> list[str]:
        """Drop workers whose lease ran out (their tasks go back to pending) and long-idle collector tasks; the
        ids of the workers dropped."""
        rows: list[Statement] = []
        gone = []
        for worker in self.registry.expire(now):
            if worker.task_id is not None and worker.task_id in self.tasks.tasks:
                self.tasks.release(worker.task_id, now)
            rows.append(("DELETE FROM workers WHERE worker_id=?", (worker.worker_id,)))
            gone.append(worker.worker_id)
        for task_id in self.tasks.prune("collector", now - self.task_idle_seconds):
            rows.append(("DELETE FROM tasks WHERE task_id=?", (task_id,)))
        if rows:
            self.pending.mark(rows)
        return gone

    # ----- persistence and status --------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"worker_counter": self.registry.counter,
                "corrupt": {w.worker_id: w.corrupt_chunks for w in self.registry.workers.values()
                            if w.corrupt_chunks}}

    def load_state_dict(self, stored: Stored, now: float) -> None:
        state = stored.meta
        for task_id, kind, idx, claims in stored.rows["tasks"]:
            self.tasks.restore(task_id, kind, idx, claims, now)
        self.registry.counter = int(state["worker_counter"])
        corrupt = state.get("corrupt", {})
        for worker_id, kind, name, held, restarts, request_id in stored.rows["workers"]:
            # Workers keep their ids across a coordinator restart: each gets a fresh lease to reconnect within.
            worker = self.registry.restore(worker_id, kind, name, held, restarts, request_id, now)  # type: ignore[arg-type]
            worker.corrupt_chunks = int(corrupt.get(worker_id, 0))
            if held is not None and held in self.tasks.tasks:
                self.tasks.mark_claimed(held, worker_id)

    def worker_status(self, now: float, buffered: Mapping[str, int]) -> list[WorkerStatus]:
        """`buffered`: worker id -> its chunks in the replay buffer now."""
        return [WorkerStatus(worker_id=w.worker_id, kind=w.kind, name=w.name, task_id=w.task_id,
                             last_seen_seconds_ago=now - w.last_seen, restarts=w.restarts,
                             buffered_chunks=buffered.get(w.worker_id, 0), last_error=w.last_error,
                             corrupt_chunks=w.corrupt_chunks, flagged=self.flagged(w))
                for w in self.registry.workers.values()]

    def learner_tasks(self) -> list[TaskRecord]:
        return sorted((t for t in self.tasks.tasks.values() if t.kind == "learner"), key=lambda t: t.index)

    def learner_ranks(self, now: float) -> list[LearnerRank]:
        """Each learner task with the worker holding it and how long ago that worker was heard from (a worker
        whose lease expired is gone, and its task pending again)."""
        ranks = []
        for task in self.learner_tasks():
            worker = self.registry.workers.get(task.worker_id) if task.worker_id else None
            ranks.append(LearnerRank(task_id=task.task_id, worker_id=worker.worker_id if worker else None,
                                     last_seen_seconds_ago=now - worker.last_seen if worker else None))
        return ranks

    def task_status(self) -> list[TaskStatus]:
        return [TaskStatus(task_id=t.task_id, kind=t.kind, state=t.state, worker_id=t.worker_id, claims=t.claims)
                for t in self.tasks.tasks.values()]


def task_row(task: TaskRecord) -> Statement:
    return ("INSERT OR REPLACE INTO tasks (task_id, kind, idx, claims) VALUES (?, ?, ?, ?)",
            (task.task_id, task.kind, task.index, task.claims))


def worker_row(worker: Worker) -> Statement:
    return ("INSERT OR REPLACE INTO workers (worker_id, kind, name, task_id, restarts, request_id) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (worker.worker_id, worker.kind, worker.name, worker.task_id, worker.restarts, worker.request_id))
