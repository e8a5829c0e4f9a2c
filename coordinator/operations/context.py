"""What every operation works with: the run's components, the unit of work that persists them, and the waits.

`RunContext` builds the components from the config (coordinator/state/*), restores them from the journal, and
rebuilds them when a commit fails. Operations (the other modules of this package) change components in memory
and call `commit()`: the unit of work journals exactly what they touched. Every method runs on the event loop
(or a test's one thread), so no lock is needed; a route awaits `settle()` before replying, so nothing is
acknowledged before it is durable. If a commit fails, `recover` reloads every component from what the journal
holds, undoing the lost mutations.

Waiting workers hear of what an operation did through `commit` too: an end of the run only once the commit that
holds it is durable (a worker told `solved` exits for good, so a run rolled back by a failed commit must never
have been announced ended), a lifted pause at once (collectors waiting it out get back to work).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from statistics import fmean
from typing import Any, TypeVar

from rlfleet.coordinator.errors import Conflict, JournalUnavailable
from rlfleet.coordinator.journal.committer import JournalFailed
from rlfleet.coordinator.journal.component import Component
from rlfleet.coordinator.journal.database import Journal
from rlfleet.coordinator.journal.unit import UnitOfWork
from rlfleet.coordinator.operations.workload import Workload, workload_of
from rlfleet.coordinator.signals import Signal
from rlfleet.coordinator.state.config import LiveConfig
from rlfleet.coordinator.state.control import Control
from rlfleet.coordinator.state.dataplane import DataPlane
from rlfleet.coordinator.state.fleet import Fleet
from rlfleet.coordinator.state.judge import Judge
from rlfleet.coordinator.state.lifecycle import Lifecycle
from rlfleet.coordinator.state.opponents import Opponents
from rlfleet.coordinator.state.payloads import PayloadLifetime
from rlfleet.coordinator.state.policybook import PolicyBook
from rlfleet.coordinator.state.progress import LearnerProgress
from rlfleet.coordinator.telemetry import Telemetry
from rlfleet.shared.algorithms import spec_of
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import BudgetConfig, RunConfig
from rlfleet.shared.config.threshold import resolve_threshold
from rlfleet.shared.envs.seeds import COLLECTOR_TASKS
from rlfleet.shared.loops import loop_of
from rlfleet.shared.storage.protocol import PayloadStore
from rlfleet.shared.wire import MAX_BODY_BYTES, Directive, JournalStatus, RunState, Score, WorkerKind

log = logging.getLogger(__name__)
R = TypeVar("R")
# The pause directive's re-check interval, for a collector that does not wait a pause out in a long poll
# (`while_paused`): one written against the protocol before it had one.
PAUSE_SECONDS = 0.05


class RunContext:
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
        budget: BudgetConfig | None = None,
        telemetry: Telemetry | None = None,
        dataset_store: PayloadStore | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.journal = journal or Journal(None)
        self.max_body_bytes = max_body_bytes  # the server's request body limit, served to collectors
        self.dataset_store = dataset_store  # the dataset store, read by runs that train on a recording
        self.telemetry = telemetry or Telemetry()
        self.store = store
        self.clock, self.wall_clock = clock, wall_clock
        self.sample_wait_seconds = sample_wait_seconds
        self.reopen_stopped = reopen_stopped  # a stopped run resumed by name continues training
        self._sizes = (lease_seconds, keep_policies, max_workers, idempotency_seconds, max_chunk_ids)
        self.policy_signal, self.data_signal = Signal(), Signal()
        self.generation_signal = Signal()  # a generation opened, a member freed, a result in
        self.resume_signal = Signal()  # collection may go on: a pause lifted, the rate limiter let collectors go
        self._collection_paused = False  # as of the last commit: a change to False fires resume_signal
        self.payloads = PayloadLifetime(store)
        meta = self.journal.meta()
        config = resolve_threshold(config)  # journalled as it applies: a number or null (shared/config/threshold.py)
        rebudgeted = False  # resumed with another budget than its own (`budget`: asked for on this start)
        if meta:
            stored = RunConfig.model_validate(meta["config"])
            if budget is not None and budget != stored.budget:
                log.info("run %s resumes with the budget asked for now: %s (it had %s)", stored.name,
                         budget.model_dump(), stored.budget.model_dump())
                stored, rebudgeted = stored.model_copy(update={"budget": budget}), True
            if stored != config:
                log.warning("run %s resumes with the config it started with; the config file's changes are "
                            "ignored, its budget's excepted (start a run under a new name to use them)",
                            stored.name)
            config = stored
        # The loop kind's part of the run: it lives as long as the run, its components are rebuilt with the rest.
        self.workload: Workload = workload_of(loop_of(spec_of(config.algo).loop))(self)
        self._build(config)
        self.journal.create(t for c in self.work.components for t in c.tables)
        if not meta:
            self.fleet.create_singletons()
            for component in self.work.components:
                component.pending.mark()  # a new run: every component's initial state is journalled
            self.commit()
        else:
            self._restore(resumed=True, rebudgeted=rebudgeted)

    def _build(self, config: RunConfig) -> None:
        lease, keep, max_workers, window, max_ids = self._sizes
        self.settings = LiveConfig(config)
        self.fleet = Fleet(lease, max_workers, task_idle_seconds=max(60.0, 10 * lease),
                           max_collector_tasks=1 if config.deterministic else COLLECTOR_TASKS,  # seed blocks
                           learners=config.learner.replicas)
        self.data = DataPlane(config, window, max_ids)
        self.policies = PolicyBook(keep)
        self.opponents = Opponents(config.self_play)
        self.judge = Judge(config.env, config.evaluation)
        self.lifecycle = Lifecycle(config.budget, self.clock)
        self.learner = LearnerProgress()
        self.control = Control(self.plan.spec.live)
        components: list[Component] = [self.settings, self.lifecycle, self.fleet, self.data, self.policies,
                                       self.judge, self.learner, self.opponents, self.control,
                                       *self.workload.build()]  # the loop kind's: generations, a dataset server
        self.work = UnitOfWork(self.journal, components, self.payloads.delete)

    @property
    def config(self) -> RunConfig:
        return self.settings.config

    @property
    def plan(self) -> RunPlan:
        return self.settings.plan

    # ----- persistence -------------------------------------------------------------------------------------
    def commit(self, after: Callable[[], None] | None = None) -> Future[None]:
        """Journal what the operation changed (the unit of work knows what); `after` runs once it is durable.

        Every operation that changes anything ends here, so this is also where its effect on waiting workers is
        settled: a pause it lifted releases the collectors waiting it out, a run state it changed is announced
        once durable."""
        paused = self.collection_paused
        if self._collection_paused and not paused:
            self.resume_signal.fire()
        self._collection_paused = paused
        lifecycle = self.lifecycle
        state, final = lifecycle.state, lifecycle.final
        if (state, final) != (lifecycle.committed_state, lifecycle.committed_final):
            announce = self.on_loop(lambda: self._announce(state, final))
            after = announce if after is None else _then(after, announce)
        return self.work.commit(after)

    def _announce(self, state: RunState, final: str | None) -> None:
        """`state` (and the end of training, `final`) is durable: tell workers (every waiter re-checks, and a run
        that ended releases them all)."""
        if self.lifecycle.mark_committed(state, final):
            self._wake_all()

    def _wake_all(self) -> None:
        self.policy_signal.fire()
        self.data_signal.fire()
        self.generation_signal.fire()
        self.resume_signal.fire()

    def _restore(self, resumed: bool, rebudgeted: bool = False) -> None:
        components = self.work.components
        loaded = self.journal.load([c.key for c in components], [t for c in components for t in c.tables])
        assert loaded is not None  # the run's creation was committed before anything could restore it
        _, stored = loaded
        now = self.clock()
        for component in components:
            component.load_state_dict(stored[component.key], now)
        if resumed and self.lifecycle.resumed(self.reopen_stopped):
            log.info("run %s was stopped; it continues", self.config.name)
        if rebudgeted:
            self.settings.pending.mark()  # the new budget is journalled: a later restart keeps it
            if self.lifecycle.extend(self.data.env_steps, now):
                log.info("run %s had used up its budget; the new one leaves room, so it trains on", self.config.name)
        self.commit()  # a resume is counted; chunks found gone meanwhile leave the journal too
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

    def recover(self) -> None:
        """After a failed commit: reload every component from the journal, then accept commits again."""
        if self.journal.committer.failure is None:
            return
        log.error("journal commit failed (%s): reloading the run's state from the journal",
                  self.journal.committer.failure)
        self.journal.committer.clear()
        self.payloads.undone()  # the files of draws that were not kept are the reloaded buffer's again
        self._build(RunConfig.model_validate(self.journal.meta()["config"]))
        self._restore(resumed=False)
        self._wake_all()

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

    def close(self) -> None:
        self.flush()
        self.payloads.close()

    def journal_status(self) -> JournalStatus:
        committer = self.journal.committer
        return JournalStatus(commits=committer.commits, submissions=committer.submissions,
                             chunk_ids_remembered=len(self.data.ledger))

    # ----- waits and what every reply carries --------------------------------------------------------------
    @property
    def max_wait_seconds(self) -> float:
        """The longest long-poll: half a lease, so a waiting worker always renews in time."""
        return self.fleet.lease_seconds / 2

    async def wait_until(self, condition: Callable[[], bool], signal: Signal, timeout: float) -> float:
        """Wait (no thread held) until `condition` holds, the run's end is durable, or `timeout` seconds pass; the
        seconds waited."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        deadline = start + timeout
        while self.lifecycle.committed_running and not condition() and (remaining := deadline - loop.time()) > 0:
            await signal.wait(remaining)
        return loop.time() - start

    @property
    def collection_paused(self) -> bool:
        """Collectors are told to pause: by the operator, or by the rate limiter (they are ahead of the learner)."""
        return self.control.paused or self.data.collectors_ahead()

    def directive(self, kind: WorkerKind | None) -> Directive:
        """What every reply tells a worker: the run state and policy known durable, the pause, the counters.
        Collectors and learners of a run with no threshold whose budget is used up (durably) hear
        budget_exhausted: their part is done while the run waits for its end-of-budget test."""
        pause = PAUSE_SECONDS if kind == "collector" and self.collection_paused else 0.0
        control, lifecycle = self.control, self.lifecycle
        state = lifecycle.committed_state
        if state == "running" and lifecycle.committed_final is not None and kind in ("collector", "learner"):
            state = "budget_exhausted"
        return Directive(run_state=state, policy=self.policies.committed, pause_seconds=pause,
                         env_steps_total=self.data.env_steps, checkpoints=control.checkpoints,
                         evaluations=control.evaluations, settings=len(control.changes),
                         checkpoint_load=control.latest_load if kind == "learner" else None,
                         final_test=self.judge.final_in_flight, **(self._progress() if kind == "learner" else {}))

    def _progress(self) -> dict[str, Any]:
        """What a learner's hooks see of the run beyond its own counters (learner_worker/hooks.py): the recent
        training return and the latest validation and held-out test."""
        returns, validation, tests = self.data.recent_returns, self.judge.latest, self.judge.tests
        return {"recent_return_mean": fmean(returns) if returns else None,
                "latest_validation": None if validation is None else Score(
                    policy_version=validation.policy_version, mean=validation.mean, env_steps=validation.env_steps),
                "latest_test": None if not tests else Score(
                    policy_version=tests[-1].policy_version, mean=tests[-1].mean, env_steps=tests[-1].env_steps)}

    def end(self, state: RunState, message: str) -> None:
        """End the run (the first reason stands); every waiter is released once the end is durable (`commit`)."""
        if self.lifecycle.end(state, message, self.clock()):
            self.commit()

    def running(self, what: str) -> None:
        """Refuse `what` once the run has ended."""
        if not self.lifecycle.running:
            raise Conflict(f"cannot {what}: the run has ended ({self.lifecycle.state})")


def _then(first: Callable[[], None], second: Callable[[], None]) -> Callable[[], None]:
    def both() -> None:
        first()
        second()

    return both
