"""Background upload of chunks: encode, write atomically to the store, then report, while envs keep stepping.

The queue is bounded (backpressure instead of unbounded memory). A chunk id is fixed before the first try,
so a report retried after a timeout is recognised by the coordinator and never counted twice. The thread is
started by `WorkerSession.spawn`: if an upload fails other than by a 4xx for that chunk (a full disk, a report
that does not validate, the coordinator gone), the whole collector ends with a non-zero status.

With `collector.report_batch` K > 1 each chunk is still written at once, but its report is held until K are
held or the oldest has waited `report_delay_seconds`, then all go in one `POST /v1/chunk-batches`: a fleet of
hundreds of collectors costs the coordinator a fraction of the CPU per chunk (README, "The coordinator under a
fleet"). A batch whose body would pass the coordinator's `max_body_bytes` (served in the task: reports grow with
their chunk's episodes) goes in as many requests as it takes to stay below it. A flush (lockstep collection) and
a clean stop report whatever is held.
"""

from __future__ import annotations

import logging
import queue
import time
import uuid
from dataclasses import dataclass

from rlfleet.collector_worker.rollout import Chunk
from rlfleet.shared.payloads.codec import Compression, encode_chunk
from rlfleet.shared.storage.layout import chunk_path
from rlfleet.shared.storage.protocol import PayloadStore
from rlfleet.shared.wire import (
    MAX_BODY_BYTES,
    ChunkAck,
    ChunkBatch,
    ChunkBatchAck,
    ChunkReport,
    ChunkVerdict,
    EpisodeStat,
    batch_bytes,
)
from rlfleet.shared.worker.client import CoordinatorRejected, Stopped
from rlfleet.shared.worker.session import WorkerSession

log = logging.getLogger(__name__)


@dataclass
class Pending:
    chunk: Chunk
    task_id: str


_FLUSH = object()  # in the queue: report what is held now


class Uploader:
    def __init__(self, session: WorkerSession, store: PayloadStore, depth: int = 2, report_batch: int = 1,
                 report_delay_seconds: float = 2.0, max_body_bytes: int = MAX_BODY_BYTES,
                 compression: Compression = "none") -> None:
        self.session = session
        self.compression = compression
        self.store = store
        self.queue: queue.Queue[Pending | object | None] = queue.Queue(maxsize=depth)
        self.report_batch, self.report_delay_seconds = report_batch, report_delay_seconds
        self.max_body_bytes = max_body_bytes
        self.acked = 0
        self.rejected = 0
        self.requests = 0
        self._thread = session.spawn("uploader", self._loop)

    def submit(self, pending: Pending) -> None:
        """Queue a chunk, waiting while the queue is full; raises Stopped if the upload thread has ended."""
        if not self._put(pending):
            raise Stopped("the uploader has stopped (see the log for why)")

    def _put(self, item: Pending | object) -> bool:
        """Queue `item`, waiting while the queue is full; False if the upload thread has ended."""
        while self._thread.is_alive():
            try:
                self.queue.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def flush(self) -> None:
        """Wait until every submitted chunk was uploaded and answered (force_sync collects in lockstep)."""
        if self.report_batch > 1:
            self._put(_FLUSH)  # report what is held now
        while self._thread.is_alive():
            with self.queue.all_tasks_done:
                if self.queue.unfinished_tasks == 0:
                    return
                self.queue.all_tasks_done.wait(0.5)

    def close(self, timeout: float = 30.0) -> None:
        """Flush what is queued (so collected work is not dropped on a clean stop), then end the thread.

        Bounded: if the thread already died with a full queue, nobody would ever take the sentinel."""
        deadline = time.monotonic() + timeout
        while self._thread.is_alive() and time.monotonic() < deadline:
            try:
                self.queue.put(None, timeout=0.5)
                break
            except queue.Full:
                continue
        self._thread.join(max(0.0, deadline - time.monotonic()))

    def _loop(self) -> None:
        held: list[ChunkReport] = []  # written, not yet reported; each still an unfinished queue task
        due = 0.0
        while True:
            try:
                item = self.queue.get(timeout=max(0.0, due - time.monotonic()) if held else None)
            except queue.Empty:
                item = _FLUSH  # the oldest held report has waited long enough
            else:
                if item is _FLUSH:
                    self.queue.task_done()
            if isinstance(item, Pending):
                if not held:
                    due = time.monotonic() + self.report_delay_seconds
                try:
                    held.append(self._write(item))
                except BaseException:
                    self.queue.task_done()
                    raise
                if len(held) < self.report_batch:
                    continue
            if held:
                try:
                    for request in self._requests(held):
                        self._report(request)
                finally:
                    for _ in held:
                        self.queue.task_done()
                    held = []
            if item is None:
                self.queue.task_done()
                return

    def _write(self, item: Pending) -> ChunkReport:
        """Encode and store the chunk: the report that names it."""
        chunk_id = uuid.uuid4().hex
        path = chunk_path(item.task_id, chunk_id)
        data = encode_chunk(item.chunk.arrays, {"task_id": item.task_id, "chunk_id": chunk_id,
                                                "policy_version": item.chunk.policy_version},
                            compression=self.compression)
        sha = self.store.put(path, data)
        return ChunkReport(
            chunk_id=chunk_id, worker_id=self.session.worker_id, task_id=item.task_id, payload_path=path,
            sha256=sha, size_bytes=len(data), env_steps=item.chunk.env_steps, num_envs=item.chunk.num_envs,
            ends=item.chunk.ends, fresh_columns=item.chunk.fresh_columns,
            episodes=[EpisodeStat(ret=r, length=n, opponent=o) for r, n, o in item.chunk.episodes],
            policy_version=item.chunk.policy_version, env_errors=item.chunk.env_errors,
        )

    def _requests(self, reports: list[ChunkReport]) -> list[list[ChunkReport]]:
        """`reports` in order, cut into requests whose bodies stay within the coordinator's limit. A report too
        large on its own still goes (alone): the coordinator's 413 refuses it like any other report."""
        requests: list[list[ChunkReport]] = []
        sizes: list[int] = []
        for report in reports:
            size = len(report.model_dump_json())  # the client sends the same JSON
            if sizes and batch_bytes([*sizes, size]) > self.max_body_bytes:
                sizes = []
            if not sizes:
                requests.append([])
            requests[-1].append(report)
            sizes.append(size)
        return requests

    def _report(self, reports: list[ChunkReport]) -> None:
        """One request for all of `reports`; a report the coordinator will never accept (its task is gone, say)
        has its payload deleted, so no orphan is left behind."""
        self.requests += 1
        try:
            if len(reports) == 1:
                ack = self.session.client.call("POST", "/v1/chunks", ChunkAck, reports[0])
                verdicts = [ChunkVerdict(chunk_id=reports[0].chunk_id, duplicate=ack.duplicate)]
                directive = ack.directive
            else:
                batch = self.session.client.call("POST", "/v1/chunk-batches", ChunkBatchAck,
                                                 ChunkBatch(reports=reports))
                verdicts, directive = batch.results, batch.directive
        except CoordinatorRejected as exc:
            verdicts = [ChunkVerdict(chunk_id=r.chunk_id, duplicate=False, error=exc.error, message=str(exc))
                        for r in reports]
            directive = None
        for report, verdict in zip(reports, verdicts, strict=True):
            if verdict.error is None:
                self.acked += 1
            else:
                log.warning("chunk %s rejected: %s %s", report.chunk_id, verdict.error, verdict.message)
                self.store.delete(report.payload_path)
                self.rejected += 1
        if directive is not None:
            self.session.update(directive)
