"""Background upload of chunks: encode, write atomically to the store, then report, while envs keep stepping.

The queue is bounded (backpressure instead of unbounded memory). A chunk id is fixed before the first try,
so a report retried after a timeout is recognised by the coordinator and never counted twice. The thread is
started by `WorkerSession.spawn`: if an upload fails other than by a 4xx for that chunk (a full disk, a report
that does not validate, the coordinator gone), the whole collector ends with a non-zero status.
"""

from __future__ import annotations

import logging
import queue
import time
import uuid
from dataclasses import dataclass

from collector_worker.rollout import Chunk
from shared.client import CoordinatorRejected, Stopped
from shared.codec import encode_chunk
from shared.layout import chunk_path
from shared.session import WorkerSession
from shared.store import PayloadStore
from shared.wire import ChunkAck, ChunkReport, EpisodeStat

log = logging.getLogger(__name__)


@dataclass
class Pending:
    chunk: Chunk
    task_id: str


class Uploader:
    def __init__(self, session: WorkerSession, store: PayloadStore, depth: int = 2) -> None:
        self.session = session
        self.store = store
        self.queue: queue.Queue[Pending | None] = queue.Queue(maxsize=depth)
        self.acked = 0
        self.rejected = 0
        self._thread = session.spawn("uploader", self._loop)

    def submit(self, pending: Pending) -> None:
        """Queue a chunk, waiting while the queue is full; raises Stopped if the upload thread has ended."""
        while self._thread.is_alive():
            try:
                self.queue.put(pending, timeout=0.5)
                return
            except queue.Full:
                continue
        raise Stopped("the uploader has stopped (see the log for why)")

    def flush(self) -> None:
        """Wait until every submitted chunk was uploaded and answered (force_sync collects in lockstep)."""
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
        while (item := self.queue.get()) is not None:
            try:
                self._upload(item)
            finally:
                self.queue.task_done()

    def _upload(self, item: Pending) -> None:
        chunk_id = uuid.uuid4().hex
        path = chunk_path(item.task_id, chunk_id)
        data = encode_chunk(item.chunk.arrays, {"task_id": item.task_id, "chunk_id": chunk_id,
                                                "policy_version": item.chunk.policy_version})
        sha = self.store.put(path, data)
        report = ChunkReport(
            chunk_id=chunk_id, worker_id=self.session.worker_id, task_id=item.task_id, payload_path=path,
            sha256=sha, size_bytes=len(data), env_steps=item.chunk.env_steps, num_envs=item.chunk.num_envs,
            ends=item.chunk.ends, fresh_columns=item.chunk.fresh_columns,
            episodes=[EpisodeStat(ret=r, length=n) for r, n in item.chunk.episodes],
            policy_version=item.chunk.policy_version, env_errors=item.chunk.env_errors,
        )
        try:
            ack = self.session.client.call("POST", "/v1/chunks", ChunkAck, report)
        except CoordinatorRejected as exc:
            # The coordinator will never accept this chunk (e.g. its task is gone): drop the orphan file.
            log.warning("chunk %s rejected: %s", chunk_id, exc)
            self.store.delete(path)
            self.rejected += 1
            return
        self.acked += 1
        self.session.update(ack.directive)
