"""Task queues: what each worker kind should do, claimed under the worker's lease.

Collector tasks are created on demand, one per collector that asks, so `--scale collector=N` needs no
configuration; a task whose worker's lease expires goes back to pending and is claimed (lowest index first,
from a heap: no scan per claim) before a new one is made. A collector task left pending for long is pruned,
so a fleet that shrank from 1,000 to 10 does not carry 990 idle tasks. Indices are never reused, so a task's
seeds are never repeated. Learner tasks (one per rank of the learner group, `learner.replicas`) and the evaluator
task are made when the run starts and are never pruned.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Literal

from rlfleet.shared.wire import WorkerKind


@dataclass
class TaskRecord:
    task_id: str
    kind: WorkerKind
    index: int
    state: Literal["pending", "claimed"] = "pending"
    worker_id: str | None = None
    claims: int = 0
    pending_since: float = 0.0


class TaskQueue:
    def __init__(self) -> None:
        self.tasks: dict[str, TaskRecord] = {}
        self._next_index: dict[str, int] = {}
        self._pending: dict[str, list[tuple[int, str]]] = {}  # kind -> heap of (index, task id), lazily cleaned

    def create(self, kind: WorkerKind, now: float = 0.0) -> TaskRecord:
        index = self._next_index.get(kind, 0)
        return self.restore(f"{kind}-{index}", kind, index, 0, now)

    def created(self, kind: WorkerKind) -> int:
        """Tasks of that kind ever created (indices are never reused)."""
        return self._next_index.get(kind, 0)

    def restore(self, task_id: str, kind: WorkerKind, index: int, claims: int, now: float = 0.0) -> TaskRecord:
        """(Re)create a task as pending; ids keep counting from the highest index seen."""
        task = TaskRecord(task_id, kind, index, claims=claims, pending_since=now)
        self.tasks[task_id] = task
        self._next_index[kind] = max(self._next_index.get(kind, 0), index + 1)
        heapq.heappush(self._pending.setdefault(kind, []), (index, task_id))
        return task

    def mark_claimed(self, task_id: str, worker_id: str) -> None:
        task = self.tasks[task_id]
        task.state, task.worker_id = "claimed", worker_id

    def claim(self, kind: WorkerKind, worker_id: str, create_if_empty: bool, now: float = 0.0) -> TaskRecord | None:
        heap = self._pending.setdefault(kind, [])
        task = None
        while heap:
            _, task_id = heapq.heappop(heap)
            candidate = self.tasks.get(task_id)
            if candidate is not None and candidate.state == "pending":
                task = candidate
                break
        if task is None:
            if not create_if_empty:
                return None
            task = self.create(kind, now)
            heapq.heappop(heap)
        task.state, task.worker_id = "claimed", worker_id
        task.claims += 1
        return task

    def release(self, task_id: str, now: float = 0.0) -> None:
        task = self.tasks[task_id]
        task.state, task.worker_id, task.pending_since = "pending", None, now
        heapq.heappush(self._pending.setdefault(task.kind, []), (task.index, task_id))

    def prune(self, kind: WorkerKind, idle_before: float) -> list[str]:
        """Forget `kind` tasks pending since before `idle_before`; returns their ids."""
        gone = [t.task_id for t in self.tasks.values()
                if t.kind == kind and t.state == "pending" and t.pending_since < idle_before]
        for task_id in gone:
            del self.tasks[task_id]
        return gone
