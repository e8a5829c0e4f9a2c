"""A thread that keeps a queue of ready batches: sampling calls and payload loads overlap with training.

The training loop never waits on an HTTP round trip per gradient step: one sample call fetches
`batches_per_request` batches, and the next call is already under way while those are trained on. New
priorities (prioritized replay) travel the same way: queued by the training loop, sent by this thread in
one request just before the next sample call.
"""

from __future__ import annotations

import logging
import queue
import threading

import numpy as np

from learner_worker.cache import ChunkCache
from shared.client import CoordinatorRejected, CoordinatorUnavailable, Stopped
from shared.session import WorkerSession
from shared.wire import PriorityAck, PriorityUpdate, SampleRequest, SampleResponse

log = logging.getLogger(__name__)


class Prefetcher:
    def __init__(self, session: WorkerSession, cache: ChunkCache, buffer_id: str, batch_size: int,
                 batches_per_request: int, depth: int = 2) -> None:
        self.session = session
        self.cache = cache
        self.path = f"/v1/buffers/{buffer_id}/sample"
        self.priority_path = f"/v1/buffers/{buffer_id}/priorities"
        self._priorities: list[tuple[np.ndarray, np.ndarray]] = []
        self._priorities_lock = threading.Lock()
        self.priorities_ignored = 0
        self.batch_size = batch_size
        self.per_request = batches_per_request
        self.queue: queue.Queue[dict[str, np.ndarray]] = queue.Queue(maxsize=depth * batches_per_request)
        self.error: BaseException | None = None
        self.waits = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="prefetch", daemon=True)
        self._thread.start()

    def get(self, timeout: float) -> dict[str, np.ndarray] | None:
        if self.error is not None:
            raise self.error
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def send_priorities(self, ids: np.ndarray, priorities: np.ndarray) -> None:
        with self._priorities_lock:
            self._priorities.append((ids, priorities))

    def _flush_priorities(self) -> None:
        with self._priorities_lock:
            pending, self._priorities = self._priorities, []
        if not pending:
            return
        ids = np.concatenate([i for i, _ in pending])
        values = np.concatenate([p for _, p in pending]).astype(np.float64)
        ack = self.session.client.call("POST", self.priority_path, PriorityAck, PriorityUpdate(
            worker_id=self.session.worker_id, ids=ids.tolist(), priorities=values.tolist()))
        self.priorities_ignored += ack.ignored
        self.session.update(ack.directive)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set() and self.session.running:
            request = SampleRequest(worker_id=self.session.worker_id, batch_size=self.batch_size,
                                    num_batches=self.per_request)
            try:
                self._flush_priorities()
                reply = self.session.client.call("POST", self.path, SampleResponse, request)
            except CoordinatorRejected as exc:
                if exc.error == "not_enough_data":
                    self.waits += 1
                    continue  # the coordinator already waited; ask again
                self.error = exc
                return
            except (CoordinatorUnavailable, Stopped) as exc:
                self.error = exc
                return
            self.session.update(reply.directive)
            for batch in self.cache.batches(reply):
                while not self._stop.is_set():
                    try:
                        self.queue.put(batch, timeout=0.5)
                        break
                    except queue.Full:
                        continue
