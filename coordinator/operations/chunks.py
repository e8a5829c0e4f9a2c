"""Chunks coming in: each report checked against the run and the store, acknowledged exactly once; chunks a
learner found corrupt going out, counted against their producer."""

from __future__ import annotations

import asyncio
import logging

from rlfleet.coordinator.errors import (
    Conflict,
    CoordinatorError,
    Invalid,
    StoreUnavailableError,
    TaskNotHeld,
    WorkerFlagged,
)
from rlfleet.coordinator.operations.budget import check_budget
from rlfleet.coordinator.operations.context import RunContext
from rlfleet.coordinator.state.ingest import check_report
from rlfleet.shared.storage.protocol import StorePathError, StoreUnavailable
from rlfleet.shared.wire import ChunkAck, ChunkBatchAck, ChunkReport, ChunkVerdict, CorruptAck, CorruptReport

log = logging.getLogger(__name__)
PayloadSize = int | None | StorePathError | StoreUnavailable  # a size, absent, or why it could not be had


class Chunks:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def ingest(self, report: ChunkReport) -> ChunkAck:
        """Acknowledge a chunk exactly once (stats the payload inline: tests and tools; routes use the async
        forms)."""
        return self._ingest_sized(report, self._size(report.payload_path))

    def _ingest_sized(self, report: ChunkReport, size: PayloadSize) -> ChunkAck:
        fresh = self.admit(report, size)
        if fresh:
            self._accept([report])
        self.ctx.commit()
        return ChunkAck(chunk_id=report.chunk_id, duplicate=not fresh, directive=self.ctx.directive("collector"))

    async def ingest_one(self, report: ChunkReport) -> ChunkAck:
        (size,) = await self._payload_sizes([report])
        return await self.ctx.settled(self._ingest_sized(report, size))

    async def ingest_batch(self, reports: list[ChunkReport]) -> ChunkBatchAck:
        """Each report on its own terms (`take_in`); one thread hop for all payload sizes, one settle."""
        results = self.take_in(reports, await self._payload_sizes(reports))
        await self.ctx.settle()
        return ChunkBatchAck(results=results, directive=self.ctx.directive("collector"))

    def admit(self, report: ChunkReport, size: PayloadSize) -> bool:
        """Check a chunk report (False for a retry of an acknowledged one); raises for a report to refuse."""
        ctx = self.ctx
        if ctx.data.ledger.seen(report.chunk_id, report.sha256):
            ctx.data.count_duplicate()
            return False
        check_report(report, ctx.config, ctx.policies.latest_version)
        worker = ctx.fleet.worker(report.worker_id, ctx.clock(), "collector")
        if worker.task_id != report.task_id:
            raise TaskNotHeld(f"worker {report.worker_id!r} does not hold task {report.task_id!r} (it holds "
                              f"{worker.task_id!r}); claim a task and report chunks of that task")
        if ctx.fleet.flagged(worker):
            raise WorkerFlagged(f"worker {report.worker_id!r} sent {worker.corrupt_chunks} corrupt payloads; its "
                                "reports are refused. Check its disk and restart it (it registers anew)")
        if isinstance(size, StoreUnavailable):
            raise StoreUnavailableError(f"{size}; the chunk was not acknowledged, report it again")
        if isinstance(size, StorePathError):
            raise Invalid(str(size))
        if size is None:
            raise Invalid(f"payload {report.payload_path!r} is not in the store; write it before reporting")
        if size != report.size_bytes:
            raise Invalid(f"payload {report.payload_path!r} has {size} bytes, report says {report.size_bytes}")
        ctx.telemetry.chunk_bytes.observe(size)  # admitted: the caller takes it in
        return True

    def take_in(self, reports: list[ChunkReport], sizes: list[PayloadSize]) -> list[ChunkVerdict]:
        """Admit each report of a batch on its own terms, then take every fresh chunk in with one buffer pass and
        one journal submission. A repeat within the batch is a retry of a report the batch acknowledges (a
        conflict if its content differs). A store that cannot be reached refuses the whole batch (503): nothing
        of it is acknowledged."""
        if down := next((s for s in sizes if isinstance(s, StoreUnavailable)), None):
            raise StoreUnavailableError(f"{down}; no chunk of the batch was acknowledged, report them again")
        verdicts: list[ChunkVerdict] = []
        fresh: dict[str, ChunkReport] = {}
        for report, size in zip(reports, sizes, strict=True):
            try:
                known = fresh.get(report.chunk_id)
                if known is not None:
                    if known.sha256 != report.sha256:
                        raise Conflict(f"chunk {report.chunk_id!r} appears twice in the batch with different "
                                       "content")
                    self.ctx.data.count_duplicate()
                elif self.admit(report, size):
                    fresh[report.chunk_id] = report
                    verdicts.append(ChunkVerdict(chunk_id=report.chunk_id, duplicate=False))
                    continue
                verdicts.append(ChunkVerdict(chunk_id=report.chunk_id, duplicate=True))
            except CoordinatorError as exc:
                verdicts.append(ChunkVerdict(chunk_id=report.chunk_id, duplicate=False, error=exc.code,
                                             message=exc.message))
        if fresh:
            self._accept(list(fresh.values()))
        self.ctx.commit()
        return verdicts

    def _accept(self, reports: list[ChunkReport]) -> None:
        """Take admitted chunks in; the caller commits and settles before replying."""
        ctx = self.ctx
        ctx.data.ingest(reports, ctx.policies.latest_version, ctx.wall_clock())
        check_budget(ctx)
        ctx.data_signal.fire()

    def report_corrupt(self, report: CorruptReport) -> CorruptAck:
        ctx = self.ctx
        ctx.fleet.worker(report.worker_id, ctx.clock(), "learner")
        removed, producer = ctx.data.remove_corrupt(report.chunk_id)
        if producer is not None and ctx.fleet.note_corrupt(producer):
            log.warning("worker %s is flagged: too many corrupt payloads; its chunk reports are refused", producer)
        if removed:
            log.warning("chunk %s of worker %s removed as corrupt: %s", report.chunk_id, producer, report.reason)
        ctx.commit()
        return CorruptAck(removed=removed, directive=ctx.directive("learner"))

    def _size(self, path: str) -> PayloadSize:
        """The payload's size, None if absent, or why it could not be had: a path refused (said in the 422), or
        a store that did not answer (503: the collector retries the report later)."""
        try:
            return self.ctx.store.size(path)
        except (StorePathError, StoreUnavailable) as exc:
            return exc

    async def _payload_sizes(self, reports: list[ChunkReport]) -> list[PayloadSize]:
        """Payload sizes: inline for a local store (microseconds each), in a thread for a remote one."""
        if self.ctx.store.local:
            return [self._size(r.payload_path) for r in reports]
        return await asyncio.to_thread(lambda: [self._size(r.payload_path) for r in reports])
