"""Task queues: what each worker kind should do, claimed under the worker's lease.

Collector tasks are created on demand, one per collector that asks, so `--scale collector=N` needs no
configuration; a task whose worker's lease expires goes back to pending and is claimed before a new one is
made. Learner and evaluator tasks exist once per run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from shared.wire import WorkerKind


@dataclass
class TaskRecord:
    task_id: str
    kind: WorkerKind
    index: int
    state: Literal["pending", "claimed"] = "pending"
    worker_id: str | None = None
    claims: int = 0


class TaskQueue:
    def __init__(self) -> None:
        self.tasks: dict[str, TaskRecord] = {}
        self._per_kind: dict[str, int] = {}

    def create(self, kind: WorkerKind) -> TaskRecord:
        index = self._per_kind.get(kind, 0)
        self._per_kind[kind] = index + 1
        task = TaskRecord(f"{kind}-{index}", kind, index)
        self.tasks[task.task_id] = task
        return task

    def restore(self, task_id: str, kind: WorkerKind, index: int, claims: int) -> TaskRecord:
        """Recreate a journalled task as pending; ids keep counting from the highest index seen."""
        task = TaskRecord(task_id, kind, index, claims=claims)
        self.tasks[task_id] = task
        self._per_kind[kind] = max(self._per_kind.get(kind, 0), index + 1)
        return task

    def mark_claimed(self, task_id: str, worker_id: str) -> None:
        task = self.tasks[task_id]
        task.state, task.worker_id = "claimed", worker_id

    def claim(self, kind: WorkerKind, worker_id: str, create_if_empty: bool) -> TaskRecord | None:
        pending = [t for t in self.tasks.values() if t.kind == kind and t.state == "pending"]
        if pending:
            task = min(pending, key=lambda t: t.index)
        elif create_if_empty:
            task = self.create(kind)
        else:
            return None
        task.state, task.worker_id = "claimed", worker_id
        task.claims += 1
        return task

    def release(self, task_id: str) -> None:
        task = self.tasks[task_id]
        task.state, task.worker_id = "pending", None
