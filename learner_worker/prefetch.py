"""A thread that keeps a queue of ready batches: sampling calls and payload loads overlap with training.

The training loop never waits on an HTTP round trip per gradient step: one sample call fetches
`batches_per_request` batches, and the next call is already under way while those are trained on. New
priorities (prioritized replay) travel the same way: queued by the training loop, sent by this thread in
one request just before the next sample call; so do reports of unusable payloads the cache found.

The chunk loop's `ChunkFetcher` does the same for whole chunks: the sample call and the payloads' decoding (hash
check, msgpack, and whatever PayloadReader.read does to rebuild a chunk) run on its thread, not the training thread.
How far it may run ahead depends on the lag the run allows: with `force_sync` (max_policy_lag 0) it takes a batch
only once the training thread asks for one, after publishing the policy of the last: a chunk taken during an update
would be trained on after the next publish, one version old, which the run forbids (the coordinator drops such
chunks as stale instead). Otherwise it takes the next batch while the current one trains, one batch ahead at most:
the coordinator bounds the lag when it samples, and the batch waiting adds at most the one update in flight.
Even under max_policy_lag 1, where that costs the most (chunks made during an update can go stale in the queue),
taking ahead measured faster: bench/pixels.py's stack_lag1 arm on configs/pong_ppo.yaml (2 cores, 2 collectors, the
learner at 2 threads, medians of 2) trained 181 env steps/s (55-62% of those collected) against 151 (64-68%)
when it took each batch only after publishing.
Measured on configs/cartpole_impala.yaml through `rlfleet up` (40k env steps, one run each, beside another run on
the 2 cores): the training thread waited for data 18% of its time when it took and decoded the chunks itself, 4%
with this thread.

The threads are started by `WorkerSession.spawn`: an exception it does not expect (say priorities that are not
finite, or a bug) ends the learner with a non-zero status instead of leaving the training loop waiting for
batches that will never come while the heartbeat keeps the lease alive.
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid

import numpy as np

from rlfleet.learner_worker.cache import BatchReader, PayloadReader
from rlfleet.shared.wire import CorruptAck, CorruptReport, PriorityAck, PriorityUpdate, SampleRequest, SampleResponse
from rlfleet.shared.worker.client import CoordinatorRejected
from rlfleet.shared.worker.session import WorkerSession

log = logging.getLogger(__name__)
MAX_CHUNKS_PER_TAKE = 256  # chunk loop: an upper bound on chunks per sample; max_batch_size is the real limit


def report_corrupt(session: WorkerSession, buffer_id: str, reader: PayloadReader) -> None:
    """Tell the coordinator about each payload `reader` found unusable, so it stops serving it.

    A refusal (the chunk already left the buffer, say) is logged, not fatal: the learner skips the chunk anyway."""
    for chunk_id, reason in reader.take_corrupt():
        report = CorruptReport(worker_id=session.worker_id, chunk_id=chunk_id, reason=reason[:500])
        try:
            ack = session.client.call("POST", f"/v1/buffers/{buffer_id}/corrupt", CorruptAck, report)
        except CoordinatorRejected as exc:
            log.warning("report of corrupt chunk %s refused: %s", chunk_id, exc)
            continue
        session.update(ack.directive)
        log.info("reported corrupt chunk %s (%s)", chunk_id, "removed" if ack.removed else "already gone")


def post_priorities(session: WorkerSession, path: str, pending: list[tuple[np.ndarray, np.ndarray]]) -> int:
    """Send |TD| of trained rows as their new priorities; returns how many ids had left the buffer."""
    if not pending:
        return 0
    ids = np.concatenate([i for i, _ in pending])
    values = np.concatenate([p for _, p in pending]).astype(np.float64)
    ack = session.client.call("POST", path, PriorityAck, PriorityUpdate(
        worker_id=session.worker_id, ids=ids.tolist(), priorities=values.tolist()))
    session.update(ack.directive)
    return ack.ignored


class Prefetcher:
    def __init__(self, session: WorkerSession, cache: BatchReader, buffer_id: str, batch_size: int,
                 batches_per_request: int, depth: int = 2) -> None:
        self.session = session
        self.cache = cache
        self.buffer_id = buffer_id
        self.path = f"/v1/buffers/{buffer_id}/sample"
        self.priority_path = f"/v1/buffers/{buffer_id}/priorities"
        self._priorities: list[tuple[np.ndarray, np.ndarray]] = []
        self._priorities_lock = threading.Lock()
        self.priorities_ignored = 0
        self.batch_size = batch_size
        self.per_request = batches_per_request
        self.queue: queue.Queue[dict[str, np.ndarray]] = queue.Queue(maxsize=depth * batches_per_request)
        self.error: CoordinatorRejected | None = None
        self.waits = 0
        self._stop = threading.Event()
        self._thread = session.spawn("prefetch", self._loop)

    def get(self, timeout: float) -> dict[str, np.ndarray] | None:
        """The next batch, or None after `timeout`; re-raises a refusal the training loop must handle (a 404
        means the lease was lost). Other failures end the process through the session."""
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
        self.priorities_ignored += post_priorities(self.session, self.priority_path, pending)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set() and self.session.running:
            # A fresh id per logical request, fixed before the first try: a retried sample is answered with
            # the first reply instead of drawing (and counting) a second batch.
            request = SampleRequest(worker_id=self.session.worker_id, request_id=uuid.uuid4().hex,
                                    batch_size=self.batch_size, num_batches=self.per_request)
            try:
                self._flush_priorities()
                reply = self.session.client.call("POST", self.path, SampleResponse, request)
            except CoordinatorRejected as exc:
                if exc.error == "not_enough_data":
                    self.waits += 1
                    continue  # the coordinator already waited; ask again
                self.error = exc
                return
            self.session.update(reply.directive)
            batches = self.cache.batches(reply)
            report_corrupt(self.session, self.buffer_id, self.cache)
            for batch in batches:
                while not self._stop.is_set():
                    try:
                        self.queue.put(batch, timeout=0.5)
                        break
                    except queue.Full:
                        continue


class ChunkFetcher:
    """The chunk loop's batches of fresh chunks, taken from the queue and decoded on a thread of their own (see the
    module doc); `ahead`: take the next batch while the current one trains."""

    def __init__(self, session: WorkerSession, reader: PayloadReader, buffer_id: str, ahead: bool) -> None:
        self.session, self.reader, self.buffer_id, self.ahead = session, reader, buffer_id, ahead
        self.path = f"/v1/buffers/{buffer_id}/sample"
        self.ready: queue.Queue[list[dict[str, np.ndarray]]] = queue.Queue(maxsize=1)
        self.asked = threading.Event()  # the thread takes one batch per ask
        self.owed = False  # an ask the thread has not answered yet (the training thread's alone to set and clear)
        self.error: CoordinatorRejected | None = None
        self._stop = threading.Event()
        self._thread = session.spawn("chunk-fetch", self._loop)

    def get(self, timeout: float) -> list[dict[str, np.ndarray]]:
        """The next batch's usable chunks, or [] after `timeout`; re-raises a refusal the training loop must handle
        (a 404: the lease was lost)."""
        if self.error is not None:
            raise self.error
        # One ask at a time. The training loop polls while the coordinator holds a sample call open; asking at each
        # poll would leave an ask standing once the batch came, and the thread would take the next batch during
        # the update, one version late under force_sync (measured on Pong: 15% of all chunks went stale that way).
        if not self.owed:
            self.owed = True
            self.asked.set()
        try:
            chunks = self.ready.get(timeout=timeout)
        except queue.Empty:
            return []
        self.owed = self.ahead  # ahead: the next batch is asked for now; else once this one's policy is published
        if self.ahead:
            self.asked.set()
        return chunks

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _take(self) -> list[dict[str, np.ndarray]]:
        # The id is fixed before the first try: a retry gets the chunks of the first reply, which max_use=1 has
        # already consumed, instead of losing them and taking the next ones.
        request = SampleRequest(worker_id=self.session.worker_id, request_id=uuid.uuid4().hex,
                                batch_size=MAX_CHUNKS_PER_TAKE, num_batches=1)
        try:
            reply = self.session.client.call("POST", self.path, SampleResponse, request)
        except CoordinatorRejected as exc:
            if exc.error != "not_enough_data":
                raise
            return []  # the coordinator already waited max_wait_seconds; ask again
        self.session.update(reply.directive)
        chunks = [arrays for arrays in map(self.reader.read, reply.chunks) if arrays is not None]
        report_corrupt(self.session, self.buffer_id, self.reader)
        return chunks

    def _loop(self) -> None:
        while not self._stop.is_set() and self.session.running:
            if not self.asked.wait(timeout=0.5):
                continue
            self.asked.clear()
            try:
                chunks = self._take()
            except CoordinatorRejected as exc:
                self.error = exc
                return
            if not chunks:
                self.asked.set()  # nothing usable yet: the ask stands
                continue
            while not self._stop.is_set():
                try:
                    self.ready.put(chunks, timeout=0.5)
                    break
                except queue.Full:
                    continue
