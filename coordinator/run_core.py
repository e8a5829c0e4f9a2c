"""The run's core: the components that own the coordinator's state, their persistence and housekeeping.

Fleet (workers, leases, tasks), data plane (buffer, limiter, ingest window, sampling), policy book, judge
(evaluations, the solve rule), lifecycle (state, budgets), learner progress, generations (population evaluation)
and payload lifetime each own their state and persistence. Every method here runs on the event loop (or a test's
one thread), so no lock is needed: an operation changes memory, submits its journal statements, and the route
awaits `settle()` before replying, so nothing is acknowledged before it is durable. If a commit fails, `recover`
reloads every component from what the journal holds, undoing the lost mutations.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from coordinator import journal as jr
from coordinator.committer import JournalFailed, Statement
from coordinator.control import Control
from coordinator.dataplane import BUFFER_ID, Change, DataPlane
from coordinator.datasets import dataset_server
from coordinator.errors import (
    Conflict,
    CoordinatorError,
    Invalid,
    JournalUnavailable,
    StoreUnavailableError,
    TaskNotHeld,
    WorkerFlagged,
)
from coordinator.fleet import Fleet
from coordinator.generations import Generations
from coordinator.ingest import check_report
from coordinator.journal import FORMAT, Journal, Snapshot
from coordinator.judge import Judge
from coordinator.lifecycle import Lifecycle
from coordinator.opponents import Opponents
from coordinator.payloads import PayloadLifetime
from coordinator.policybook import PolicyBook
from coordinator.progress import LearnerProgress
from coordinator.signals import Signal
from coordinator.tasks import TaskRecord
from coordinator.telemetry import Telemetry
from shared.algorithms.base import COLLECTOR_WORK
from shared.config.plan import RunPlan
from shared.config.run_config import RunConfig
from shared.envs.seeds import base_seed
from shared.storage.protocol import PayloadStore, StorePathError, StoreUnavailable
from shared.wire import (
    ChunkReport,
    ChunkVerdict,
    CollectorTask,
    Directive,
    EvaluatorTask,
    JournalStatus,
    LearnerTask,
    PolicyRef,
    RunState,
    Task,
    WorkerKind,
)

log = logging.getLogger(__name__)
R = TypeVar("R")
PayloadSize = int | None | StorePathError | StoreUnavailable  # a size, absent, or why it could not be had
PAUSE_SECONDS = 0.05
SNAPSHOT_EVERY = 256  # replay-log records between buffer snapshots in the journal


class RunCore:
    def __init__(
        self,
        config: RunConfig,
        store: PayloadStore,
        *,
        lease_seconds: float = 10.0,
        sample_wait_seconds: float = 1.0,
        keep_policies: int = 8,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        journal: Journal | None = None,
        max_workers: int = 4096,
        idempotency_seconds: float = 900.0,
        max_chunk_ids: int = 1_000_000,
        reopen_stopped: bool = False,
        telemetry: Telemetry | None = None,
        datasets: PayloadStore | None = None,
    ) -> None:
        self.journal = journal or Journal(None)
        self.datasets = datasets  # the dataset store, read by runs that train on a recording
        self.telemetry = telemetry or Telemetry()
        self.store = store
        self.clock, self.wall_clock = clock, wall_clock
        self.sample_wait_seconds = sample_wait_seconds
        self.reopen_stopped = reopen_stopped  # a stopped run resumed by name continues training
        self._sizes = (lease_seconds, keep_policies, max_workers, idempotency_seconds, max_chunk_ids)
        self.policy_signal, self.data_signal = Signal(), Signal()
        self.generation_signal = Signal()  # a generation opened, a member freed, a result in
        self.payloads = PayloadLifetime(store)
        snapshot = self.journal.load()
        if snapshot is not None:
            stored = RunConfig.model_validate(snapshot.meta["config"])
            if stored != config:
                log.warning("run %s resumes with the config it started with; the config file's changes are "
                            "ignored (start a run under a new name to use them)", stored.name)
            config = stored
        self.config = config
        self._build()
        if snapshot is None:
            self._commit(self.fleet.create_singletons(), "config", "lifecycle", "fleet", "data", "learner",
                         "generations", "dataset", "pool")
        else:
            self._restore(snapshot, resumed=True)

    def _build(self) -> None:
        lease, keep, max_workers, window, max_ids = self._sizes
        cfg = self.config
        self.plan = RunPlan.of(cfg)
        self.fleet = Fleet(lease, max_workers, task_idle_seconds=max(60.0, 10 * lease),
                           max_collector_tasks=1 if cfg.deterministic else None, learners=cfg.learner.replicas)
        self.data = DataPlane(cfg, window, max_ids)
        self.policies = PolicyBook(keep)
        self.opponents = Opponents(cfg.self_play)
        self.judge = Judge(cfg.env, cfg.evaluation)
        self.lifecycle = Lifecycle(cfg.budget, self.clock())
        self.learner = LearnerProgress()
        self.generations = Generations()
        self.dataset = dataset_server(cfg, self.plan.spaces, self.datasets)
        self.control = Control(self.plan.spec.live)
        self._rate: list[tuple[float, int]] = []
        self._heartbeat_cache: tuple[object, bytes] = (None, b"")

    # ----- persistence -------------------------------------------------------------------------------------
    def _state(self, part: str) -> Any:
        """A journal part's state: the config, or the component that owns that part."""
        if part == "config":
            return self.config.model_dump(mode="json")
        if part == "lifecycle":
            return self.lifecycle.state_dict(self.clock())
        owner: Any = {"fleet": self.fleet, "judge": self.judge, "control": self.control,
                      "generations": self.generations, "dataset": self.dataset, "pool": self.opponents,
                      "data": self.data, "learner": self.learner}[part]
        return None if owner is None else owner.state_dict()

    def _commit(self, statements: list[Statement], *parts: str, change: Change | None = None,
                after: Callable[[], None] | None = None) -> Future[None]:
        """Submit statements with the state of the components named. Once durable (and only then), the payloads
        of `change.gone` are queued for deletion and `after` runs, before anyone waiting is released."""
        meta = {part: self._state(part) for part in parts}
        meta["journal_format"] = FORMAT
        paths = [e.payload_path for e in change.gone] if change is not None else []

        def durable() -> None:
            if paths:
                self.payloads.delete(paths)
            if after is not None:
                after()

        if change is not None:
            statements = statements + change.statements
        if change is not None and change.replay is not None:
            return self.journal.submit_replay(change.replay, statements, meta, durable)
        return self.journal.submit(statements, meta, durable)

    def _restore(self, snap: Snapshot, resumed: bool) -> None:
        meta, now = snap.meta, self.clock()
        self.lifecycle.load_state_dict(meta["lifecycle"], now)
        self.learner.load_state_dict(meta["learner"])
        self.fleet.load_state_dict(meta["fleet"], snap, now)
        self.policies.load(snap)
        self.judge.load(snap, meta.get("judge"))
        self.control.load_state_dict(meta.get("control"))
        self.generations.load_state_dict(meta.get("generations"))
        self.opponents.load_state_dict(meta.get("pool"))
        if self.dataset is not None:
            self.dataset.load_state_dict(meta.get("dataset"))
        gone = self.data.load(meta["data"], snap)
        if resumed:
            self.lifecycle.resumes += 1
            if self.reopen_stopped and self.lifecycle.reopen(now):
                log.info("run %s was stopped; it continues", self.config.name)
        if resumed or gone:  # gone: only if the journal was cut between a draw and its removal
            self._commit([], "lifecycle", change=Change(gone=gone) if gone else None)
        log.info("%s run %s: %d env steps, %d chunks in the buffer, policy v%d, state %s",
                 "resumed" if resumed else "reloaded", self.config.name, self.data.env_steps, len(self.data.buffer),
                 self.policies.latest_version, self.lifecycle.state)

    async def settle(self) -> None:
        """Wait until everything this request saw or did is durable; 503 (with state undone) if it is not."""
        try:
            await asyncio.wrap_future(self.journal.committer.barrier())
        except JournalFailed as exc:
            self.recover()
            raise JournalUnavailable(f"{exc}; nothing of this request was kept, retry once the journal's disk "
                                     "has room") from exc

    async def settled(self, reply: R) -> R:
        """`reply`, once everything it reflects is durable."""
        await self.settle()
        return reply

    async def wait_until(self, condition: Callable[[], bool], signal: Signal, timeout: float) -> float:
        """Wait (no thread held) until `condition` holds, the run ends, or `timeout` seconds pass; the seconds
        waited."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        deadline = start + timeout
        while self.lifecycle.running and not condition() and (remaining := deadline - loop.time()) > 0:
            await signal.wait(remaining)
        return loop.time() - start

    def recover(self) -> None:
        """After a failed commit: reload every component from the journal, then accept commits again."""
        if self.journal.committer.failure is None:
            return
        log.error("journal commit failed (%s): reloading the run's state from the journal",
                  self.journal.committer.failure)
        self.journal.committer.clear()
        self.journal.recount()
        snapshot = self.journal.load()
        assert snapshot is not None  # the run's creation itself was committed before any request
        self._build()
        self._restore(snapshot, resumed=False)
        self.policy_signal.fire()
        self.data_signal.fire()
        self.generation_signal.fire()

    def on_loop(self, action: Callable[[], None]) -> Callable[[], None]:
        """`action`, made safe to call from the journal's writer thread: it runs on the event loop (or at once
        where no loop runs: tests and tools, whose callers wait for the commit themselves)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return action

        def schedule() -> None:
            loop.call_soon_threadsafe(action)

        return schedule

    def flush(self) -> None:
        """(blocking) Wait until everything submitted is committed and the files it freed are deleted."""
        self.journal.committer.drain()
        self.payloads.flush()

    def policy_durable(self, policy: PolicyRef) -> None:
        self.policies.mark_committed(policy)
        self.policy_signal.fire()

    # ----- helpers -----------------------------------------------------------------------------------------
    def directive(self, kind: WorkerKind | None) -> Directive:
        ahead = self.control.paused or self.data.collectors_ahead()
        pause = PAUSE_SECONDS if kind == "collector" and ahead else 0.0
        control = self.control
        return Directive(run_state=self.lifecycle.state, policy=self.policies.committed, pause_seconds=pause,
                         env_steps_total=self.data.env_steps, checkpoints=control.checkpoints,
                         evaluations=control.evaluations, settings=len(control.changes))

    def end(self, state: RunState, message: str) -> None:
        if self.lifecycle.end(state, message, self.clock()):
            self._commit([], "lifecycle")
            self.policy_signal.fire()
            self.data_signal.fire()
            self.generation_signal.fire()

    def task_model(self, task: TaskRecord) -> Task:
        cfg, plan = self.config, self.plan
        seed = cfg.seed  # the learner seeds itself, the evaluator derives its blocks (shared/envs/seeds.py)
        if task.kind == "collector":  # a fresh block per claim: a restarted collector never repeats a sequence
            return CollectorTask(task_id=task.task_id, env=cfg.env, spaces=plan.spaces, behaviour=plan.behaviour,
                                 collector=cfg.collector, sampling=cfg.sampling,
                                 seed=base_seed(cfg.seed, "train", task.index, task.claims),
                                 policy=self.policies.committed, lockstep=cfg.deterministic,
                                 work=COLLECTOR_WORK[plan.spec.loop], self_play=cfg.self_play)
        if task.kind == "learner":
            return LearnerTask(task_id=task.task_id, buffer_id=BUFFER_ID, algo=cfg.algo, env=cfg.env,
                               spaces=plan.spaces, behaviour=plan.behaviour, learner=cfg.learner,
                               deterministic=cfg.deterministic, replay=cfg.replay,
                               sampling=cfg.sampling, collector=cfg.collector, seed=seed)
        return EvaluatorTask(task_id=task.task_id, env=cfg.env, spaces=plan.spaces, evaluation=cfg.evaluation,
                             seed=seed, self_play=cfg.self_play)

    def _size(self, path: str) -> PayloadSize:
        """The payload's size, None if absent, or why it could not be had: a path refused (said in the 422), or
        a store that did not answer (503: the collector retries the report later)."""
        try:
            return self.store.size(path)
        except (StorePathError, StoreUnavailable) as exc:
            return exc

    async def _payload_sizes(self, reports: list[ChunkReport]) -> list[PayloadSize]:
        """Payload sizes: inline for a local store (microseconds each), in a thread for a remote one."""
        if self.store.local:
            return [self._size(r.payload_path) for r in reports]
        return await asyncio.to_thread(lambda: [self._size(r.payload_path) for r in reports])

    def admit(self, report: ChunkReport, size: PayloadSize) -> bool:
        """Check a chunk report (False for a retry of an acknowledged one); raises for a report to refuse."""
        if self.data.ledger.seen(report.chunk_id, report.sha256):
            self.data.duplicate_chunks += 1
            self._commit([], "data")
            return False
        check_report(report, self.config, self.policies.latest_version)
        worker = self.fleet.worker(report.worker_id, self.clock(), "collector")
        if worker.task_id != report.task_id:
            raise TaskNotHeld(f"worker {report.worker_id!r} does not hold task {report.task_id!r} (it holds "
                              f"{worker.task_id!r}); claim a task and report chunks of that task")
        if self.fleet.flagged(worker):
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
        self.telemetry.chunk_bytes.observe(size)  # admitted: the caller takes it in
        return True

    def take_in(self, reports: list[ChunkReport], sizes: list[PayloadSize]) -> list[ChunkVerdict]:
        """Admit each report of a batch on its own terms, then take every fresh chunk in with one buffer pass and
        one journal submission (one component snapshot). A repeat within the batch is a retry of a report the
        batch acknowledges (a conflict if its content differs). A store that cannot be reached refuses the whole
        batch (503): nothing of it is acknowledged."""
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
                    self.data.duplicate_chunks += 1
                elif self.admit(report, size):
                    fresh[report.chunk_id] = report
                    verdicts.append(ChunkVerdict(chunk_id=report.chunk_id, duplicate=False))
                    continue
                verdicts.append(ChunkVerdict(chunk_id=report.chunk_id, duplicate=True))
            except CoordinatorError as exc:
                verdicts.append(ChunkVerdict(chunk_id=report.chunk_id, duplicate=False, error=exc.code,
                                             message=exc.message))
        if fresh:
            self.accept(self.data.ingest(list(fresh.values()), self.policies.latest_version, self.wall_clock()))
        return verdicts

    def accept(self, change: Change) -> None:
        """Journal chunks the data plane took in (`data.ingest`); the caller settles before replying."""
        self.lifecycle.check_budget(self.data.env_steps, self.clock())
        self._commit([], "data", "lifecycle", change=change)
        self.data_signal.fire()

    # ----- housekeeping ------------------------------------------------------------------------------------
    def tick(self) -> None:
        """Expire leases (returning their tasks), enforce the budgets, sample the step rate, release consumed
        payloads past their grace, forget chunk ids past the idempotency window, compact the buffer log."""
        now = self.clock()
        statements = self.fleet.expire(now)
        if self.lifecycle.check_budget(self.data.env_steps, now):
            self.policy_signal.fire()
            self.generation_signal.fire()
        if self.generation_signal.waiters and self.generations.claimable(now):
            self.generation_signal.fire()  # a member's lease ran out: waiting collectors may take it
        self._rate = [*self._rate[-15:], (now, self.data.env_steps)]
        self.payloads.expire_consumed(now)
        statements.append(jr.chunks_forgotten(self.data.ledger.expire(self.wall_clock())))
        change = None
        if self.journal.replay_log_length() > SNAPSHOT_EVERY:
            change = Change(replay=self.data.snapshot_record())
        self._commit(statements, "lifecycle", "fleet", "data", change=change)

    def referenced_payloads(self) -> set[str]:
        return {e.payload_path for e in self.data.buffer.entries()} | self.payloads.in_grace()

    def steps_per_second(self) -> float:
        if len(self._rate) >= 2 and self._rate[-1][0] > self._rate[0][0]:
            (t0, s0), (t1, s1) = self._rate[0], self._rate[-1]
            return (s1 - s0) / (t1 - t0)
        return 0.0

    def close(self) -> None:
        self.flush()
        self.payloads.close()

    def journal_status(self) -> JournalStatus:
        committer = self.journal.committer
        return JournalStatus(commits=committer.commits, submissions=committer.submissions,
                             chunk_ids_remembered=len(self.data.ledger))
