"""The run: one operation per REST call, each orchestrating the components it spans (see run_core).

Sync methods change memory and submit journal statements; the async ones are what routes call: they do
store I/O in a thread, wait on signals (never holding a thread), and settle before replying.
"""

from __future__ import annotations

import asyncio
import logging

import numpy as np

from coordinator.dataplane import Change
from coordinator.errors import Conflict, Invalid, StoreUnavailableError
from coordinator.run_core import BUFFER_ID, PAUSE_SECONDS, PayloadSize
from coordinator.run_datasets import RunDatasets
from coordinator.status import build_status
from shared.storage.protocol import StorePathError, StoreUnavailable
from shared.wire import (
    Ack,
    ChunkAck,
    ChunkBatchAck,
    ChunkReport,
    ClaimResponse,
    CorruptAck,
    CorruptReport,
    EvaluationReport,
    EvaluationResult,
    HeartbeatResponse,
    HoldoutReport,
    HoldoutResult,
    LearnReport,
    OpponentPool,
    PolicyPublish,
    PriorityAck,
    PriorityUpdate,
    RegisterResponse,
    SampleRequest,
    SampleResponse,
    Status,
    WorkerKind,
)

log = logging.getLogger(__name__)
__all__ = ["BUFFER_ID", "PAUSE_SECONDS", "Run"]


class Run(RunDatasets):
    # ----- workers -----------------------------------------------------------------------------------------
    def register(self, kind: WorkerKind, name: str, restarts: int = 0, request_id: str | None = None,
                 last_error: str | None = None) -> RegisterResponse:
        worker, statements = self.fleet.register(kind, name, restarts, request_id, self.clock(), last_error)
        if statements:
            self._commit(statements, "fleet")
        lease = self.fleet.lease_seconds
        return RegisterResponse(worker_id=worker.worker_id, lease_seconds=lease, heartbeat_seconds=lease / 4,
                                max_wait_seconds=self.max_wait_seconds, run_name=self.config.name,
                                directive=self.directive(kind))

    def heartbeat(self, worker_id: str, scope: str = "admin") -> HeartbeatResponse:
        worker = self.fleet.worker(worker_id, self.clock(), scope=scope)
        return HeartbeatResponse(lease_seconds=self.fleet.lease_seconds, directive=self.directive(worker.kind))

    async def heartbeat_reply(self, worker_id: str, scope: str, newer_than: int | None, wait: float) -> bytes:
        """Renew the lease; with `newer_than`, hold the reply until a newer policy is durable (at most `wait`).
        A publish wakes every waiter at once; they share one serialised reply while nothing else changed."""
        if newer_than is not None:
            self.fleet.worker(worker_id, self.clock(), scope=scope)  # unknown or foreign: refused before waiting
            await self.wait_until(lambda: self.policies.committed_version > newer_than, self.policy_signal,
                                  min(wait, self.max_wait_seconds))
        reply = self.heartbeat(worker_id, scope)  # renews the lease again after the wait
        self.telemetry.policy_heard(newer_than, reply.directive.policy, self.clock())
        key = (reply.directive, reply.lease_seconds)
        if self._heartbeat_cache[0] != key:
            self._heartbeat_cache = (key, reply.model_dump_json().encode())
        return self._heartbeat_cache[1]

    def claim(self, worker_id: str, scope: str = "admin") -> ClaimResponse:
        worker = self.fleet.worker(worker_id, self.clock(), scope=scope)
        if not self.lifecycle.running:
            return ClaimResponse(task=None, directive=self.directive(worker.kind))
        task, statements = self.fleet.claim(worker, self.clock())
        if statements:
            self._commit(statements, "fleet")
        return ClaimResponse(task=self.task_model(task) if task else None, directive=self.directive(worker.kind))

    # ----- chunks ------------------------------------------------------------------------------------------
    def ingest(self, report: ChunkReport) -> ChunkAck:
        """Acknowledge a chunk exactly once (stats the payload inline: tests and tools; routes use the async
        forms)."""
        return self._ingest_sized(report, self._size(report.payload_path))

    def _ingest_sized(self, report: ChunkReport, size: PayloadSize) -> ChunkAck:
        fresh = self.admit(report, size)
        if fresh:
            self.accept(self.data.ingest([report], self.policies.latest_version, self.wall_clock()))
        return ChunkAck(chunk_id=report.chunk_id, duplicate=not fresh, directive=self.directive("collector"))

    async def ingest_one(self, report: ChunkReport) -> ChunkAck:
        (size,) = await self._payload_sizes([report])
        return await self.settled(self._ingest_sized(report, size))

    async def ingest_batch(self, reports: list[ChunkReport]) -> ChunkBatchAck:
        """Each report on its own terms (`take_in`); one thread hop for all payload sizes, one settle."""
        results = self.take_in(reports, await self._payload_sizes(reports))
        await self.settle()
        return ChunkBatchAck(results=results, directive=self.directive("collector"))

    def report_corrupt(self, report: CorruptReport) -> CorruptAck:
        self.fleet.worker(report.worker_id, self.clock(), "learner")
        producer, change = self.data.remove_corrupt(report.chunk_id)
        if producer is not None and self.fleet.note_corrupt(producer):
            log.warning("worker %s is flagged: too many corrupt payloads; its chunk reports are refused", producer)
        removed = bool(change.gone)
        if removed:
            log.warning("chunk %s of worker %s removed as corrupt: %s", report.chunk_id, producer, report.reason)
            self._commit([], "data", "fleet", change=change)
        return CorruptAck(removed=removed, directive=self.directive("learner"))

    # ----- sampling and learning ---------------------------------------------------------------------------
    def sample(self, request: SampleRequest) -> SampleResponse:
        """Draw now (no waiting); a retry of the learner's last request id gets that same reply."""
        return SampleResponse.model_validate_json(self._draw(request))

    def _draw(self, request: SampleRequest) -> str:
        """The reply as JSON, serialised once: journalled for retries and sent as it is."""
        worker = self.fleet.worker(request.worker_id, self.clock(), "learner")
        if worker.task_id is None:
            raise Conflict(f"worker {request.worker_id!r} holds no learner task; claim one first")
        retried = self.data.retried(worker.worker_id, request.request_id)
        if retried is not None:
            return retried
        drawn, change = self.data.sample(request, self.policies.latest_version)
        self.payloads.consumed(self.clock(), [e.payload_path for e in drawn.gone])
        change.gone = []  # consumed files outlive the draw by a grace period (the learner is about to read them)
        body = self.data.response(drawn, request.batch_size, self.directive("learner")).model_dump_json()
        self._commit(self.data.remember_reply(worker.worker_id, request.request_id, body), "data", change=change)
        return body

    async def sample_waiting(self, request: SampleRequest) -> str:
        """Wait (without a thread) until the draw can be served, up to the configured wait, then draw; the
        reply's JSON, ready to send."""
        hoped = self.data.sample_size(request)[3]
        waited = await self.wait_until(lambda: self.data.retried(request.worker_id, request.request_id) is not None
                                       or self.data.servable(hoped), self.data_signal,
                                       min(self.config.sampling.max_wait_seconds, self.sample_wait_seconds))
        self.telemetry.sample_wait.observe(waited)
        return await self.settled(self._draw(request))

    def update_priorities(self, update: PriorityUpdate) -> PriorityAck:
        if len(update.ids) != len(update.priorities):
            raise Invalid(f"{len(update.ids)} ids but {len(update.priorities)} priorities; they must pair up")
        if self.config.replay.sampler != "prioritized":
            raise Conflict(f"buffer {self.data.buffer.buffer_id!r} uses the {self.config.replay.sampler} sampler; "
                           "priorities apply only to replay.sampler=prioritized")
        self.fleet.worker(update.worker_id, self.clock(), "learner")
        updated, record = self.data.update_priorities(np.asarray(update.ids, np.int64),
                                                      np.asarray(update.priorities, np.float64))
        self._commit([], "data", change=Change(replay=record))
        return PriorityAck(updated=updated, ignored=len(update.ids) - updated, directive=self.directive("learner"))

    def learn_report(self, report: LearnReport) -> Ack:
        self.fleet.worker(report.worker_id, self.clock(), "learner")
        self.learner.report(report)
        scored = self.dataset is not None and self.dataset.record_scores(report.losses)
        self._commit([], "learner", *(["dataset"] if scored else []))
        return Ack(directive=self.directive("learner"))

    def publish_policy(self, publish: PolicyPublish) -> Ack:
        """Publish a version and wait for it to be durable (tests and tools; the route uses `publish`)."""
        try:
            size = self.store.size(publish.policy.path)
        except StorePathError as exc:
            raise Invalid(str(exc)) from exc
        self._publish_sized(publish, size)
        self.journal.committer.drain()
        return Ack(directive=self.directive("learner"))

    async def publish(self, publish: PolicyPublish) -> Ack:
        try:
            size = await asyncio.to_thread(self.store.size, publish.policy.path)
        except StorePathError as exc:
            raise Invalid(str(exc)) from exc
        except StoreUnavailable as exc:
            raise StoreUnavailableError(f"{exc}; the policy was not published, publish it again") from exc
        self._publish_sized(publish, size)
        await self.settle()  # the version is announced on the loop before this returns: the reply names it
        return Ack(directive=self.directive("learner"))

    def _publish_sized(self, publish: PolicyPublish, size: int | None) -> None:
        """Waiting collectors learn of the version only once it is durable (they may act with it at once)."""
        policy = publish.policy
        if not policy.path.startswith("policies/"):
            raise Invalid("policy path must be under 'policies/'")
        if size is None:
            raise Invalid(f"policy file {policy.path!r} is not in the store; write it before publishing")
        self.fleet.worker(publish.worker_id, self.clock(), "learner")
        fresh, dropped, statements = self.policies.publish(policy)
        if fresh:
            book = {p.version for p in self.policies.versions}
            unpinned = self.opponents.unpinned(dropped, self.opponents.published(policy), book)
            self.telemetry.published(policy.version, self.clock())
            self.learner.iteration = max(self.learner.iteration, publish.iteration)
            announce = self.on_loop(lambda: self.policy_durable(policy))

            def durable() -> None:
                self.payloads.delete(unpinned)
                announce()

            self._commit(statements, "learner", "data", "pool", change=self.data.remove_stale(policy.version),
                         after=durable)

    async def opponents_reply(self) -> OpponentPool:
        """The pool for collectors and the evaluator, each version's file checked first: one deleted behind the
        coordinator's back (it pins them) leaves the pool with an error in the log and a count in status,
        instead of sending every worker after a file that is gone."""
        if not self.opponents.enabled:
            raise Conflict(f"run {self.config.name!r} does not use self-play (no self_play section in its config)")
        pool = list(self.opponents.pool)
        try:
            sizes = await asyncio.to_thread(lambda: [self.store.size(p.path) for p in pool])
        except StoreUnavailable as exc:
            raise StoreUnavailableError(f"{exc}; ask for the opponent pool again") from exc
        gone = [p for p, size in zip(pool, sizes, strict=True) if size is None]
        if gone:
            for p in gone:
                log.error("opponent pool: policy v%d (%s) is no longer in the store, though the pool pins it: "
                          "deleted outside rlfleet? It leaves the pool", p.version, p.path)
            self.opponents.forget(gone)
            self._commit([], "pool")
            await self.settle()
        return self.opponents.reply(self.policies.committed)

    # ----- evaluation and the run --------------------------------------------------------------------------
    def evaluate(self, report: EvaluationReport) -> EvaluationResult:
        self.fleet.worker(report.worker_id, self.clock(), "evaluator")
        retried = self.judge.retried(report.request_id)
        if retried is not None:
            return retried
        result, statements = self.judge.judge(report, self.policies.latest_version, self.data.env_steps,
                                              self.lifecycle.wall_seconds(self.clock()), self.learner.iteration,
                                              self.fleet.alive)
        self._commit(statements, "judge")  # the validation and any test request in one transaction
        return result

    def test(self, report: HoldoutReport) -> HoldoutResult:
        self.fleet.worker(report.worker_id, self.clock(), "evaluator")
        retried = self.judge.retried_test(report.request_id)
        if retried is not None:
            return retried
        result = self.judge.test(report, self.data.env_steps, self.lifecycle.wall_seconds(self.clock()),
                                 self.learner.iteration)
        if result.confirmed and self.lifecycle.end("solved", self.judge.verdict(result), self.clock()):
            self.policy_signal.fire()
        self._commit([], "judge", "lifecycle")  # the test and the run's end in one transaction
        return result

    def stop(self, reason: str) -> Status:
        self.end("stopped", reason)
        return self.status()

    def status(self) -> Status:
        return build_status(self)

    def evaluation_history(self) -> list[EvaluationResult]:
        return list(self.judge.results)
