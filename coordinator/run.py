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

from coordinator.errors import Conflict, Forbidden, Invalid, NotEnoughData, NotFound, UnknownWorker
from coordinator.journal import Journal, ReplayRecord, Snapshot
from coordinator.lag import LagStats
from coordinator.ratelimit import RateLimiter
from coordinator.registry import Registry, Worker
from coordinator.replay.buffer import Entry, ReplayBuffer, Sampled
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
    PriorityAck,
    PriorityUpdate,
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
SNAPSHOT_EVERY = 256  # replay-log records between buffer snapshots in the journal
CONSUMED_GRACE_SECONDS = 30.0  # a learner reads what it sampled within this; then max_use'd files are deleted


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
        self.buffer = ReplayBuffer(BUFFER_ID, config.replay, config.sampling)
        self.queue = config.replay.sampler in ("fifo", "lifo")
        self.lag = LagStats()
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
        self._consumed: deque[tuple[float, str]] = deque()
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
            "worker_counter": self.registry.counter, "resumes": self.resumes, **self._buffer_meta(),
        }

    def _buffer_meta(self) -> dict[str, Any]:
        b = self.buffer
        return {"head": b.head, "max_priority": b.max_priority, "evicted_chunks": b.evicted_chunks,
                "removed_max_use": b.removed_max_use, "removed_stale": b.removed_stale,
                "unservable": b.unservable, "lag": self.lag.state()}

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
        self._restore_buffer(snap)
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

    def _restore_buffer(self, snap: Snapshot) -> None:
        """Re-insert the kept chunks at their ring positions with their initial priorities, free rows that
        chunks no longer kept had overwritten, then replay the buffer log (snapshot, priorities, draws)."""
        meta, buffer = snap.meta, self.buffer
        for entry, base_id, leaf in snap.buffer:
            buffer.head = base_id
            buffer.add(entry, initial_leaf=leaf)
        buffer.head = int(meta["head"])
        gone = buffer.expire_below(buffer.head - buffer.capacity)
        for record in snap.replay_log:
            if record.kind == "snapshot":
                assert record.values is not None and record.uses is not None and record.head is not None
                gone += buffer.apply_priority_state(record.ids, record.values, record.uses, record.head)
            elif record.kind == "priority":
                assert record.values is not None
                buffer.update_priorities(record.ids, record.values)
            else:
                gone += buffer.apply_uses(record.ids)
        for name in ("evicted_chunks", "removed_max_use", "removed_stale", "unservable"):
            setattr(buffer, name, int(meta[name]))
        buffer.max_priority = float(meta["max_priority"])
        self.lag.restore(meta["lag"])
        if gone:  # only possible if the journal was cut between a draw and its removal: make it consistent
            self.journal.drop_chunks(gone, {})

    # ----- helpers (lock held) -------------------------------------------------------------------------
    @property
    def latest_policy(self) -> PolicyRef | None:
        return self.policies[-1] if self.policies else None

    @property
    def _latest_version(self) -> int:
        return self.policies[-1].version if self.policies else 0

    def _collectors_ahead(self) -> bool:
        """A queue (on-policy) pauses collectors on backlog; a replay buffer on the samples-per-insert ratio."""
        if self.queue:
            return self.buffer.item_steps >= self.config.replay.tolerance_transitions
        return self.limiter.collectors_ahead()

    def _directive(self, kind: WorkerKind | None) -> Directive:
        pause = PAUSE_SECONDS if kind == "collector" and self._collectors_ahead() else 0.0
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
                task_id=task.task_id, algo=cfg.algo, env=cfg.env, collector=cfg.collector, sampling=cfg.sampling,
                net=cfg.net, seed=seed, policy=self.latest_policy,
            )
        if task.kind == "learner":
            return LearnerTask(task_id=task.task_id, buffer_id=BUFFER_ID, algo=cfg.algo, env=cfg.env, dqn=cfg.dqn,
                               ppo=cfg.ppo, replay=cfg.replay, sampling=cfg.sampling, collector=cfg.collector,
                               seed=seed)
        return EvaluatorTask(
            task_id=task.task_id, env=cfg.env, evaluation=cfg.evaluation, net=cfg.net, seed=seed
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
                max_wait_seconds=5.0,
                run_name=self.config.name,
                directive=self._directive(kind),
            )

    def heartbeat(self, worker_id: str, scope: str = "admin", newer_than: int | None = None,
                  wait: float = 0.0) -> HeartbeatResponse:
        """Renew the lease. With `newer_than`, hold the reply (at most `wait` seconds) until a newer policy
        is published: a force_sync collector learns of it within a round trip, without polling."""
        deadline = self.clock() + wait
        with self._lock:
            worker = self._worker(worker_id, scope=scope)
            while newer_than is not None and self._latest_version <= newer_than and self.state == "running":
                remaining = deadline - self.clock()
                if remaining <= 0:
                    break
                self._data.wait(remaining)
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
        _check_layout(report, self.config.replay.capacity_transitions)
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
                          report.policy_version, report.num_envs, tuple(report.ends), tuple(report.fresh_columns))
            latest = self._latest_version
            self.lag.ingested(latest - report.policy_version)
            chunk, evicted = self.buffer.add(entry)
            evicted += self.buffer.remove_stale(latest, self.config.max_staleness)
            self.limiter.inserted += report.env_steps
            if self.env_steps >= self.config.budget.max_env_steps:
                self._end("budget_exhausted", f"env-step budget of {self.config.budget.max_env_steps} used up")
            self.journal.save_chunk(entry, chunk.base_id, chunk.initial_leaf, evicted, self._meta())
            self._data.notify_all()
            ack = ChunkAck(chunk_id=report.chunk_id, duplicate=False, directive=self._directive("collector"))
        self._delete_payloads(evicted)
        return ack

    def _sample_size(self, request: SampleRequest) -> tuple[int, int | None, int]:
        """(items to draw, step cap, steps the draw needs) for a request. Fixed-length units must fit the
        configured batch bounds; episodes and chunks are whole, as many as fit under max_batch_size steps."""
        sampling = self.config.sampling
        count = request.batch_size * request.num_batches
        item_len = {"transition": 1, "sequence": sampling.sequence_length}.get(sampling.unit)
        if item_len is None:
            return count, sampling.max_batch_size, sampling.min_batch_size
        steps = count * item_len
        if not sampling.min_batch_size <= steps <= sampling.max_batch_size:
            raise Invalid(f"a sample of {count} {sampling.unit}s ({steps} transitions) is outside the configured "
                          f"batch bounds [{sampling.min_batch_size}, {sampling.max_batch_size}] transitions")
        return count, None, steps

    def _servable(self, steps: int) -> bool:
        """(lock held) Whether `steps` can be served now: queues need that many fresh steps, replay needs the
        rate limiter's permission."""
        if self.queue:
            return self.buffer.item_steps >= steps
        return self.buffer.items > 0 and self.limiter.can_sample(steps)

    def sample(self, request: SampleRequest) -> SampleResponse:
        count, step_cap, needed = self._sample_size(request)
        sampling = self.config.sampling
        deadline = self.clock() + min(sampling.max_wait_seconds, self.sample_wait_seconds)
        # A queue waits for a full batch (all collectors' chunks of this round), settling for min_batch_size
        # only when the wait runs out; replay serves as soon as the rate limiter allows.
        hoped = step_cap if self.queue and step_cap is not None else needed
        with self._lock:
            worker = self._worker(request.worker_id, "learner")
            if worker.task_id is None:
                raise Conflict(f"worker {request.worker_id!r} holds no learner task; claim one first")
            # No staleness check here: a chunk can only become stale when a policy is published or arrive
            # stale, and publish_policy and ingest drop those.
            while self.state == "running" and not self._servable(hoped):
                remaining = deadline - self.clock()
                if remaining <= 0:
                    break
                self._data.wait(remaining)
            if not self._servable(needed):
                raise NotEnoughData(self._not_enough_message())
            drawn = self.buffer.sample(self.rng, count, self._beta(), step_cap)
            self.limiter.sampled += int(drawn.lengths.sum())
            versions = np.array([c.entry.policy_version for c in drawn.chunks], np.int64)
            self.lag.sampled(self._latest_version - versions[drawn.chunk_index])
            self._journal_draw(drawn)
            # Chunks consumed by this very draw (max_use) are about to be read by the learner: their files go
            # after a grace period, in tick().
            now = self.clock()
            self._consumed.extend((now, entry.payload_path) for entry in drawn.gone)
            return self._sample_response(drawn, request.batch_size)

    def _beta(self) -> float:
        replay = self.config.replay
        return replay.beta_start + (1 - replay.beta_start) * min(1.0, self.limiter.sampled / replay.beta_horizon)

    def _not_enough_message(self) -> str:
        replay, sampling = self.config.replay, self.config.sampling
        if self.queue:
            return (f"the queue holds {self.buffer.item_steps} fresh transitions, fewer than "
                    f"sampling.min_batch_size={sampling.min_batch_size} after "
                    f"{sampling.max_wait_seconds:g}s. Retry shortly.")
        return (f"buffer has {self.limiter.inserted} inserted transitions (needs {replay.min_transitions}), "
                f"{self.buffer.items} {sampling.unit}s to serve and {self.limiter.sampled} sampled; the learner is "
                f"ahead of samples_per_insert={self.limiter.spi}. Retry shortly.")

    def _journal_draw(self, drawn: Sampled) -> None:
        meta = {"sampled": self.limiter.sampled, **self._buffer_meta()}
        if self.config.replay.max_use is not None and len(drawn.ids):
            self.journal.save_replay(ReplayRecord("use", drawn.ids), drawn.gone, meta)
        else:
            self.journal.drop_chunks(drawn.gone, meta)

    def _sample_response(self, drawn: Sampled, batch_size: int) -> SampleResponse:
        return SampleResponse(
            unit=self.config.sampling.unit,
            chunks=[SampledChunk(chunk_id=c.entry.chunk_id, payload_path=c.entry.payload_path, sha256=c.entry.sha256,
                                 policy_version=c.entry.policy_version, num_envs=c.entry.num_envs)
                    for c in drawn.chunks],
            chunk_index=drawn.chunk_index.tolist(),
            offsets=drawn.offsets.tolist(),
            lengths=drawn.lengths.tolist(),
            ids=drawn.ids.tolist(),
            weights=drawn.weights.tolist(),
            batch_size=batch_size,
            buffer_transitions=self.buffer.transitions,
            directive=self._directive("learner"),
        )

    def _delete_payloads(self, gone: list[Entry]) -> None:
        """(lock released) Payload files of chunks that left the buffer."""
        for entry in gone:
            self.store.delete(entry.payload_path)

    def update_priorities(self, update: PriorityUpdate) -> PriorityAck:
        if len(update.ids) != len(update.priorities):
            raise Invalid(f"{len(update.ids)} ids but {len(update.priorities)} priorities; they must pair up")
        if self.config.replay.sampler != "prioritized":
            raise Conflict(f"buffer {BUFFER_ID!r} uses the {self.config.replay.sampler} sampler; priorities apply "
                           f"only to replay.sampler=prioritized")
        ids = np.asarray(update.ids, np.int64)
        priorities = np.asarray(update.priorities, np.float64)
        with self._lock:
            self._worker(update.worker_id, "learner")
            unknown = ids >= self.buffer.head
            if unknown.any():
                raise Invalid(f"{int(unknown.sum())} ids were never issued by this buffer (e.g. "
                              f"{int(ids[unknown][0])}; the next id is {self.buffer.head})")
            updated = self.buffer.update_priorities(ids, priorities)
            self.journal.save_replay(ReplayRecord("priority", ids, priorities), [],
                                     {"max_priority": self.buffer.max_priority})
            return PriorityAck(updated=updated, ignored=len(ids) - updated, directive=self._directive("learner"))

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
            outdated = self.buffer.remove_stale(policy.version, self.config.max_staleness)
            if outdated:
                self.journal.drop_chunks(outdated, self._buffer_meta())
            self._data.notify_all()
            ack = Ack(directive=self._directive("learner"))
        for old in stale:
            self.store.delete(old.path)
        self._delete_payloads(outdated)
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
        """Expire leases (returning their tasks), enforce the wall-clock budget, sample the step rate,
        delete consumed payloads past their grace period, compact the buffer log into a snapshot."""
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
            doomed = []
            while self._consumed and now - self._consumed[0][0] >= CONSUMED_GRACE_SECONDS:
                doomed.append(self._consumed.popleft()[1])
            self.journal.save_meta({"elapsed": now - self.started})
            if self.journal.replay_log_length() > SNAPSHOT_EVERY:
                ids, leaves, uses = self.buffer.priority_state()
                self.journal.save_replay(ReplayRecord("snapshot", ids, leaves, uses, self.buffer.head), [],
                                         self._buffer_meta())
        for path in doomed:
            self.store.delete(path)

    def collect_garbage(self, grace_seconds: float) -> int:
        """Delete payload files no buffer entry references, once older than the grace period (a collector
        killed between writing a chunk and reporting it leaves one). Returns how many were deleted."""
        with self._lock:
            referenced = {e.payload_path for e in self.buffer.entries()}
            referenced.update(path for _, path in self._consumed)  # sampled, still in their grace period
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
                policy_lag=self.lag.status(),
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
                buffers=[self._buffer_status()],
            )

    def _buffer_status(self) -> BufferStatus:
        b = self.buffer
        return BufferStatus(
            buffer_id=b.buffer_id, sampler=self.config.replay.sampler, unit=self.config.sampling.unit,
            chunks=len(b), transitions=b.transitions, items=b.items, capacity_transitions=b.capacity,
            evicted_chunks=b.evicted_chunks, removed_max_use=b.removed_max_use, removed_stale=b.removed_stale,
            max_priority=b.max_priority, beta=self._beta() if b.prioritized else 1.0,
            inserted_transitions=self.limiter.inserted, sampled_transitions=self.limiter.sampled,
            samples_per_insert=self.limiter.spi, tolerance_transitions=self.limiter.tolerance,
        )

    def evaluation_history(self) -> list[EvaluationResult]:
        with self._lock:
            return list(self.evaluations)


def _check_layout(report: ChunkReport, capacity: int) -> None:
    """The chunk's shape metadata must describe its rows, or items derived from it would point elsewhere."""
    rows, envs = report.env_steps, report.num_envs
    if rows % envs:
        raise Invalid(f"env_steps ({rows}) must be a multiple of num_envs ({envs}): rows are steps x envs")
    if rows > capacity:
        raise Invalid(f"a chunk of {rows} transitions exceeds the buffer capacity of {capacity}")
    ends = report.ends
    if ends and (ends[-1] >= rows or any(b <= a for a, b in zip(ends, ends[1:], strict=False))):
        raise Invalid(f"ends must be strictly ascending row indices below env_steps ({rows})")
    if any(col >= envs for col in report.fresh_columns) or len(set(report.fresh_columns)) != len(report.fresh_columns):
        raise Invalid(f"fresh_columns must be distinct env columns below num_envs ({envs})")
