"""Worker registry: self-registered workers holding leases that heartbeats renew."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from rlfleet.shared.wire import WorkerKind


@dataclass
class Worker:
    worker_id: str
    kind: WorkerKind
    name: str
    lease_expires: float
    last_seen: float
    task_id: str | None = None
    restarts: int = 0
    request_id: str | None = None
    corrupt_chunks: int = 0  # payloads of this worker a learner found unusable
    last_error: str | None = None  # why its previous process ended (its supervisor's word; not journalled)


class Registry:
    def __init__(self, lease_seconds: float) -> None:
        self.lease_seconds = lease_seconds
        self.workers: dict[str, Worker] = {}
        self.by_request: dict[str, str] = {}  # registration request id -> worker id, for retried registrations
        self.counter = 0  # ids are never reused, across coordinator restarts too

    def register(self, kind: WorkerKind, name: str, now: float, restarts: int = 0,
                 request_id: str | None = None) -> Worker:
        self.counter += 1
        worker_id = f"{kind}-{self.counter}-{secrets.token_hex(3)}"
        return self.restore(worker_id, kind, name, None, restarts, request_id, now)

    def restore(self, worker_id: str, kind: WorkerKind, name: str, task_id: str | None, restarts: int,
                request_id: str | None, now: float) -> Worker:
        worker = Worker(worker_id, kind, name, now + self.lease_seconds, now, task_id, restarts, request_id)
        self.workers[worker_id] = worker
        if request_id is not None:
            self.by_request[request_id] = worker_id
        return worker

    def get(self, worker_id: str) -> Worker | None:
        return self.workers.get(worker_id)

    def renew(self, worker: Worker, now: float) -> None:
        worker.last_seen = now
        worker.lease_expires = now + self.lease_seconds

    def expire(self, now: float) -> list[Worker]:
        """Remove and return the workers whose lease ran out."""
        gone = [w for w in self.workers.values() if w.lease_expires <= now]
        for worker in gone:
            del self.workers[worker.worker_id]
            if worker.request_id is not None:
                self.by_request.pop(worker.request_id, None)
        return gone
