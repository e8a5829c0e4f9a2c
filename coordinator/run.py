"""The run: every piece of coordinator state and the rules that change it, behind one lock.

Handlers call these methods and nothing else touches the state, so the invariants (exact counters,
idempotent chunk ids, monotonic policy versions, a task held by at most one live worker) live here alone.
Methods that delete files collect the paths under the lock and unlink them after releasing it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from coordinator.buffer import Entry, ReplayBuffer
from coordinator.errors import Conflict, Forbidden, Invalid, NotEnoughData, NotFound, UnknownWorker
from coordinator.journal import Journal, Snapshot
from coordinator.ratelimit import RateLimiter
from coordinator.registry import Registry, Worker
from coordinator.tasks import TaskQueue, TaskRecord
from shared.config import RunConfig
from shared.store import LocalStore, StorePathError
from shared.wire import (
    Ack,
    BufferStatus,
    ChunkAck,
    ChunkReport,
    ClaimResponse,
    CollectorTask,
    Directive,
    EvaluationReport,
    EvaluationResult,
    EvaluatorTask,
    HeartbeatResponse,
    LearnerStatus,
    LearnerTask,
    LearnReport,
    PolicyPublish,
    PolicyRef,
    RegisterResponse,
    RunState,
    SampledChunk,
    SampleRequest,
    SampleResponse,
    Status,
    Task,
    TaskStatus,
    WorkerKind,
    WorkerStatus,
)

log = logging.getLogger(__name__)
PAUSE_SECONDS = 0.05
BUFFER_ID = "replay-0"


class Run:
    def __init__(
        self,
        config: RunConfig,
        store: LocalStore,
        *,
        lease_seconds: float = 10.0,
        sample_wait_seconds: float = 1.0,
        keep_policies: int = 8,
        clock: Callable[[], float] = time.monotonic,
        journal: Journal | None = None,
    ) -> None:
        self.journal = journal or Journal(None)
        snapshot = self.journal.load()
        if snapshot is not None:
            stored = RunConfig.model_validate(snapshot.meta["config"])
            if stored != config:
                log.warning("run %s resumes with the config it started with; the config file's changes are "
                            "ignored (start a run under a new name to use them)", stored.name)
            config = stored
        self.config = config
        self.store = store
        self.clock = clock
        self.sample_wait_seconds = sample_wait_seconds
        self.keep_policies = keep_policies
        self._lock = threading.Lock()
        self._data = threading.Condition(self._lock)
        self.started = clock()
        self.ended: float | None = None
        self.state: RunState = "running"
        self.message = "training"
        self.registry = Registry(lease_seconds)
        self.tasks = TaskQueue()
        self.buffer = ReplayBuffer(BUFFER_ID, config.replay.capacity_transitions)
        self.limiter = RateLimiter(
            config.replay.min_transitions, config.replay.samples_per_insert, config.replay.tolerance_transitions
        )
        self.rng = np.random.default_rng(config.seed)
        self.chunk_hashes: dict[str, str] = {}
        self.env_steps = 0
        self.episodes = 0
        self.duplicate_chunks = 0
        self.env_errors = 0
        self.resumes = 0
        self.recent_returns: deque[float] = deque(maxlen=100)
        self.policies: deque[PolicyRef] = deque()
        self.iteration = 0
        self.transitions_trained = 0
        self.losses: dict[str, float] = {}
        self.evaluations: list[EvaluationResult] = []
        self.best: EvaluationResult | None = None
        self._rate: deque[tuple[float, int]] = deque(maxlen=16)
        if snapshot is None:
            for kind in ("learner", "evaluator"):
                task = self.tasks.create(kind)  # type: ignore[arg-type]
                self.journal.save_task(task.task_id, task.kind, task.index, task.claims)
            # The config never changes during a run: journalled once here, not with every mutation.
            self.journal.save_meta({"config": self.config.model_dump(mode="json"), **self._meta()})
        else:
            self._restore(snapshot)

    # ----- persistence (lock held, or during construction) ---------------------------------------------------
    def _meta(self) -> dict[str, Any]:
        now = self.clock()
        return {
            "state": self.state, "message": self.message,
            "elapsed": now - self.started,
            "ended_elapsed": None if self.ended is None else self.ended - self.started,
            "env_steps": self.env_steps, "episodes": self.episodes, "duplicate_chunks": self.duplicate_chunks,
            "env_errors": self.env_errors,
            "recent_returns": list(self.recent_returns), "iteration": self.iteration,
            "transitions_trained": self.transitions_trained, "losses": self.losses,
            "inserted": self.limiter.inserted, "sampled": self.limiter.sampled,
            "evicted_chunks": self.buffer.evicted_chunks, "worker_counter": self.registry.counter,
            "resumes": self.resumes,
        }

    def _restore(self, snap: Snapshot) -> None:
        meta, now = snap.meta, self.clock()
        self.started = now - float(meta["elapsed"])
        self.ended = None if meta["ended_elapsed"] is None else self.started + float(meta["ended_elapsed"])
        self.state, self.message = meta["state"], meta["message"]
        self.env_steps, self.episodes = int(meta["env_steps"]), int(meta["episodes"])
        self.duplicate_chunks = int(meta["duplicate_chunks"])
        self.env_errors = int(meta.get("env_errors", 0))
        self.resumes = int(meta.get("resumes", 0)) + 1
        self.recent_returns.extend(meta["recent_returns"])
        self.iteration, self.transitions_trained = int(meta["iteration"]), int(meta["transitions_trained"])
        self.losses = dict(meta["losses"])
        self.limiter.inserted, self.limiter.sampled = int(meta["inserted"]), int(meta["sampled"])
        self.chunk_hashes = dict(snap.chunk_hashes)
        for entry in snap.buffer:
            self.buffer.add(entry)
        self.buffer.evicted_chunks = int(meta["evicted_chunks"])
        self.policies.extend(PolicyRef(version=v, path=path, sha256=sha) for v, path, sha in snap.policies)
        self.evaluations = [EvaluationResult.model_validate_json(body) for body in snap.evaluations]
        self.best = max(self.evaluations, key=lambda e: e.mean, default=None)
        for task_id, kind, idx, claims in snap.tasks:
            self.tasks.restore(task_id, kind, idx, claims)  # type: ignore[arg-type]
        self.registry.counter = int(meta["worker_counter"])
        for worker_id, worker_kind, name, held, restarts in snap.workers:
            # Workers keep their ids across a coordinator restart: each gets a fresh lease to reconnect within.
            self.registry.restore(worker_id, worker_kind, name, held, restarts, now)  # type: ignore[arg-type]
            if held is not None and held in self.tasks.tasks:
                self.tasks.mark_claimed(held, worker_id)
        self.journal.save_meta({"resumes": self.resumes})
        log.info("resumed run %s: %d env steps, %d chunks in the buffer, policy v%d, state %s", self.config.name,
                 self.env_steps, len(self.buffer), self.latest_policy.version if self.latest_policy else 0,
                 self.state)

    # ----- helpers (lock held) -------------------------------------------------------------------------
    @property
    def latest_policy(self) -> PolicyRef | None:
        return self.policies[-1] if self.policies else None

    def _directive(self, kind: WorkerKind | None) -> Directive:
        pause = PAUSE_SECONDS if kind == "collector" and self.limiter.collectors_ahead() else 0.0
        return Directive(
            run_state=self.state, policy=self.latest_policy, pause_seconds=pause, env_steps_total=self.env_steps
        )

    def _worker(self, worker_id: str, kind: WorkerKind | None = None, scope: str = "admin") -> Worker:
        worker = self.registry.get(worker_id)
        if worker is None:
            raise UnknownWorker(f"worker {worker_id!r} is not registered (lease expired?); register again")
        if scope != "admin" and worker.kind != scope:
            raise Forbidden(f"a {scope!r} token cannot act for {worker.kind} {worker_id!r}")
        if kind is not None and worker.kind != kind:
            raise Forbidden(f"worker {worker_id!r} is a {worker.kind}; this endpoint is for {kind}s")
        self.registry.renew(worker, self.clock())
        return worker

    def _end(self, state: RunState, message: str) -> None:
        if self.state == "running":
            self.state, self.message, self.ended = state, message, self.clock()
            self.journal.save_meta(self._meta())
            self._data.notify_all()

    def _task_model(self, task: TaskRecord) -> Task:
        cfg = self.config
        seed = cfg.seed + 10_000 * (task.index + 1) + 100 * task.claims
        if task.kind == "collector":
            return CollectorTask(
                task_id=task.task_id, env=cfg.env, collector=cfg.collector, hidden=cfg.dqn.hidden,
                seed=seed, policy=self.latest_policy,
            )
        if task.kind == "learner":
            return LearnerTask(task_id=task.task_id, buffer_id=BUFFER_ID, env=cfg.env, dqn=cfg.dqn, replay=cfg.replay,
                               collector=cfg.collector, seed=seed)
        return EvaluatorTask(
            task_id=task.task_id, env=cfg.env, evaluation=cfg.evaluation, hidden=cfg.dqn.hidden, seed=seed
        )

    # ----- workers --------------------------------------------------------------------------------------
    def register(self, kind: WorkerKind, name: str, restarts: int = 0) -> RegisterResponse:
        with self._lock:
            worker = self.registry.register(kind, name, self.clock(), restarts)
            self.journal.save_worker(worker.worker_id, kind, name, None, restarts)
            self.journal.save_meta({"worker_counter": self.registry.counter})
            return RegisterResponse(
                worker_id=worker.worker_id,
                lease_seconds=self.registry.lease_seconds,
                heartbeat_seconds=self.registry.lease_seconds / 4,
                run_name=self.config.name,
                directive=self._directive(kind),
            )

    def heartbeat(self, worker_id: str, scope: str = "admin") -> HeartbeatResponse:
        with self._lock:
            worker = self._worker(worker_id, scope=scope)
            return HeartbeatResponse(lease_seconds=self.registry.lease_seconds, directive=self._directive(worker.kind))

    def claim(self, worker_id: str, scope: str = "admin") -> ClaimResponse:
        with self._lock:
            worker = self._worker(worker_id, scope=scope)
            if self.state != "running":
                return ClaimResponse(task=None, directive=self._directive(worker.kind))
            if worker.task_id is not None:
                task: TaskRecord | None = self.tasks.tasks[worker.task_id]
            else:
                task = self.tasks.claim(worker.kind, worker_id, create_if_empty=worker.kind == "collector")
                if task is not None:
                    worker.task_id = task.task_id
                    self.journal.save_task(task.task_id, task.kind, task.index, task.claims)
                    self.journal.save_worker(worker.worker_id, worker.kind, worker.name, task.task_id,
                                             worker.restarts)
            return ClaimResponse(
                task=self._task_model(task) if task else None, directive=self._directive(worker.kind)
            )

    # ----- data plane -----------------------------------------------------------------------------------
    def _duplicate(self, report: ChunkReport) -> ChunkAck | None:
        """(lock held) The ack for an already acknowledged chunk id, or None if the id is new."""
        known = self.chunk_hashes.get(report.chunk_id)
        if known is None:
            return None
        if known != report.sha256:
            raise Conflict(f"chunk {report.chunk_id!r} was already acknowledged with different content")
        self.duplicate_chunks += 1
        self.journal.save_meta({"duplicate_chunks": self.duplicate_chunks})
        return ChunkAck(chunk_id=report.chunk_id, duplicate=True, directive=self._directive("collector"))

    def ingest(self, report: ChunkReport) -> ChunkAck:
        """Acknowledge a chunk exactly once; the payload must already be in the store with the stated size.

        A retried report is recognised before the file is looked at: its payload may have been evicted since.
        """
        with self._lock:
            duplicate = self._duplicate(report)
        if duplicate is not None:
            return duplicate
        expected = f"chunks/{report.task_id}/{report.chunk_id}.msgpack"
        if report.payload_path != expected:
            raise Invalid(f"payload_path must be {expected!r} for this task and chunk id")
        try:
            size = self.store.size(report.payload_path)
        except StorePathError as exc:
            raise Invalid(str(exc)) from exc
        if size is None:
            raise Invalid(f"payload {report.payload_path!r} is not in the store; write it before reporting")
        if size != report.size_bytes:
            raise Invalid(f"payload {report.payload_path!r} has {size} bytes, report says {report.size_bytes}")
        with self._lock:
            task = self.tasks.tasks.get(report.task_id)
            if task is None or task.kind != "collector":
                raise NotFound(f"collector task {report.task_id!r} does not exist; claim a task first")
            duplicate = self._duplicate(report)  # a concurrent retry may have won the race
            if duplicate is not None:
                return duplicate
            worker = self.registry.get(report.worker_id)
            if worker is not None:
                self.registry.renew(worker, self.clock())
            self.chunk_hashes[report.chunk_id] = report.sha256
            self.env_steps += report.env_steps
            self.episodes += len(report.episodes)
            self.env_errors += report.env_errors
            self.recent_returns.extend(ep.ret for ep in report.episodes)
            entry = Entry(report.chunk_id, report.payload_path, report.sha256, report.env_steps,
                          report.policy_version)
            evicted = self.buffer.add(entry)
            self.limiter.inserted += report.env_steps
            if self.env_steps >= self.config.budget.max_env_steps:
                self._end("budget_exhausted", f"env-step budget of {self.config.budget.max_env_steps} used up")
            self.journal.save_chunk(entry, evicted, self._meta())
            self._data.notify_all()
            ack = ChunkAck(chunk_id=report.chunk_id, duplicate=False, directive=self._directive("collector"))
        for entry in evicted:
            self.store.delete(entry.payload_path)
        return ack

    def sample(self, request: SampleRequest) -> SampleResponse:
        count = request.batch_size * request.num_batches
        deadline = self.clock() + self.sample_wait_seconds
        with self._lock:
            worker = self._worker(request.worker_id, "learner")
            if worker.task_id is None:
                raise Conflict(f"worker {request.worker_id!r} holds no learner task; claim one first")
            while not self.limiter.can_sample(count) and self.state == "running":
                remaining = deadline - self.clock()
                if remaining <= 0:
                    raise NotEnoughData(
                        f"buffer has {self.limiter.inserted} inserted transitions (needs "
                        f"{self.config.replay.min_transitions}) and {self.limiter.sampled} sampled; the learner "
                        f"is ahead of samples_per_insert={self.limiter.spi}. Retry shortly."
                    )
                self._data.wait(remaining)
            if self.buffer.transitions == 0:
                raise NotEnoughData("the buffer is empty")
            entries, index, offsets = self.buffer.sample(self.rng, count)
            self.limiter.sampled += count
            self.journal.save_meta({"sampled": self.limiter.sampled})
            return SampleResponse(
                chunks=[SampledChunk(chunk_id=e.chunk_id, payload_path=e.payload_path, sha256=e.sha256,
                                     policy_version=e.policy_version) for e in entries],
                chunk_index=index.tolist(),
                offsets=offsets.tolist(),
                batch_size=request.batch_size,
                buffer_transitions=self.buffer.transitions,
                directive=self._directive("learner"),
            )

    def learn_report(self, report: LearnReport) -> Ack:
        with self._lock:
            self._worker(report.worker_id, "learner")
            self.iteration = report.iteration
            self.transitions_trained = report.transitions_trained
            self.losses = dict(report.losses)
            self.journal.save_meta({"iteration": self.iteration, "transitions_trained": self.transitions_trained,
                                    "losses": self.losses})
            return Ack(directive=self._directive("learner"))

    def publish_policy(self, publish: PolicyPublish) -> Ack:
        policy = publish.policy
        if not policy.path.startswith("policies/"):
            raise Invalid("policy path must be under 'policies/'")
        try:
            size = self.store.size(policy.path)
        except StorePathError as exc:
            raise Invalid(str(exc)) from exc
        if size is None:
            raise Invalid(f"policy file {policy.path!r} is not in the store; write it before publishing")
        with self._lock:
            self._worker(publish.worker_id, "learner")
            latest = self.latest_policy
            if latest is not None and policy.version <= latest.version:
                if policy.version == latest.version and policy.sha256 == latest.sha256:
                    return Ack(directive=self._directive("learner"))
                raise Conflict(f"policy version {policy.version} is not newer than {latest.version}")
            self.policies.append(policy)
            self.iteration = max(self.iteration, publish.iteration)
            stale = []
            while len(self.policies) > self.keep_policies:
                stale.append(self.policies.popleft())
            self.journal.save_policy(policy.version, policy.path, policy.sha256, [p.version for p in stale],
                                     {"iteration": self.iteration})
            ack = Ack(directive=self._directive("learner"))
        for old in stale:
            self.store.delete(old.path)
        return ack

    def evaluate(self, report: EvaluationReport) -> EvaluationResult:
        if len(report.returns) != len(report.lengths):
            raise Invalid("returns and lengths must have the same number of episodes")
        with self._lock:
            self._worker(report.worker_id, "evaluator")
            if self.latest_policy is None or report.policy_version > self.latest_policy.version:
                raise Invalid(f"policy version {report.policy_version} was never published")
            returns = np.asarray(report.returns, dtype=np.float64)
            mean = float(returns.mean())
            solved = mean >= self.config.env.solve_threshold
            result = EvaluationResult(
                policy_version=report.policy_version, mean=mean, std=float(returns.std()),
                episodes=len(returns), env_steps=self.env_steps, wall_seconds=self.clock() - self.started,
                solved=solved,
            )
            self.evaluations.append(result)
            self.journal.save_evaluation(result.model_dump_json(), {})
            if self.best is None or mean > self.best.mean:
                self.best = result
            if solved:
                self._end("solved", f"policy v{report.policy_version} scored {mean:.1f} over {len(returns)} "
                                    f"episodes (threshold {self.config.env.solve_threshold:g})")
            return result

    def stop(self, reason: str) -> Status:
        with self._lock:
            self._end("stopped", reason)
        return self.status()

    # ----- housekeeping -----------------------------------------------------------------------------------
    def tick(self) -> None:
        """Expire leases (returning their tasks), enforce the wall-clock budget, sample the step rate."""
        with self._lock:
            now = self.clock()
            expired = self.registry.expire(now)
            for worker in expired:
                if worker.task_id is not None:
                    self.tasks.release(worker.task_id)
            self.journal.remove_workers([w.worker_id for w in expired])
            if now - self.started >= self.config.budget.max_wall_seconds:
                self._end("budget_exhausted", f"wall-clock budget of {self.config.budget.max_wall_seconds:g}s used up")
            self._rate.append((now, self.env_steps))
            self.journal.save_meta({"elapsed": now - self.started})

    def collect_garbage(self, grace_seconds: float) -> int:
        """Delete payload files no buffer entry references, once older than the grace period (a collector
        killed between writing a chunk and reporting it leaves one). Returns how many were deleted."""
        with self._lock:
            referenced = {e.payload_path for e in self.buffer.entries()}
        deleted = self.store.delete_unreferenced("chunks", referenced, time.time() - grace_seconds)
        if deleted:
            log.info("garbage-collected %d unacknowledged payload files", deleted)
        return deleted

    def status(self) -> Status:
        with self._lock:
            now = self.clock()
            rate = 0.0
            if len(self._rate) >= 2 and self._rate[-1][0] > self._rate[0][0]:
                (t0, s0), (t1, s1) = self._rate[0], self._rate[-1]
                rate = (s1 - s0) / (t1 - t0)
            returns = list(self.recent_returns)
            return Status(
                run_name=self.config.name,
                run_state=self.state,
                run_message=self.message,
                coordinator_resumes=self.resumes,
                wall_seconds=(self.ended if self.ended is not None else now) - self.started,
                env_steps=self.env_steps,
                env_steps_per_second=rate,
                episodes=self.episodes,
                chunks=len(self.chunk_hashes),
                duplicate_chunks=self.duplicate_chunks,
                env_errors=self.env_errors,
                recent_return_mean=float(np.mean(returns)) if returns else None,
                policy_version=self.latest_policy.version if self.latest_policy else 0,
                learner=LearnerStatus(
                    iteration=self.iteration, transitions_trained=self.transitions_trained,
                    losses={k: v for k, v in self.losses.items() if math.isfinite(v)},
                    samples_per_insert=self.limiter.achieved_ratio(),
                ),
                latest_evaluation=self.evaluations[-1] if self.evaluations else None,
                best_evaluation=self.best,
                workers=[
                    WorkerStatus(worker_id=w.worker_id, kind=w.kind, name=w.name, task_id=w.task_id,
                                 last_seen_seconds_ago=now - w.last_seen, restarts=w.restarts)
                    for w in self.registry.workers.values()
                ],
                tasks=[
                    TaskStatus(task_id=t.task_id, kind=t.kind, state=t.state, worker_id=t.worker_id, claims=t.claims)
                    for t in self.tasks.tasks.values()
                ],
                buffers=[
                    BufferStatus(buffer_id=self.buffer.buffer_id, chunks=len(self.buffer),
                                 transitions=self.buffer.transitions,
                                 capacity_transitions=self.buffer.capacity,
                                 evicted_chunks=self.buffer.evicted_chunks)
                ],
            )

    def evaluation_history(self) -> list[EvaluationResult]:
        with self._lock:
            return list(self.evaluations)
