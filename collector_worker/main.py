"""The collector process: register, claim a task, then collect chunks until the run ends (or, for a
population-based learner, evaluate the members of its generations: collector_worker/members.py).

Policy updates arrive in every reply's directive (and at once through the heartbeat's long poll); the
collector loads a new version (sha256-checked) before the next env step. A pause directive (the rate
limiter, or the operator) idles the envs in a heartbeat long poll that the resume answers. With force_sync
the collector works in lockstep with the learner.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from rlfleet.collector_worker.members import evaluate_members
from rlfleet.collector_worker.opponents import OpponentDraw
from rlfleet.collector_worker.rollout import Rollout
from rlfleet.collector_worker.uploader import Pending, Uploader
from rlfleet.shared.loops.kind import CollectorWork
from rlfleet.shared.policy.actors import PolicyError
from rlfleet.shared.policy.files import load_policy
from rlfleet.shared.policy.manifest import ManifestError
from rlfleet.shared.storage.factory import open_store
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.storage.protocol import IntegrityError, PayloadStore
from rlfleet.shared.wire import CollectorTask, PolicyRef
from rlfleet.shared.worker.lifecycle import run_worker
from rlfleet.shared.worker.session import WorkerSession
from rlfleet.shared.worker.settings import WorkerSettings

log = logging.getLogger("rlfleet.collector")
SYNC_WAIT_SECONDS = 2.0  # one long poll of a wait for a newer policy; the wait itself loops over them (SyncWait)


class PolicyFollower:
    """Acts with the policy the coordinator's directives name as the latest (sha256-checked), loading each once.

    Checked before every env step: the heartbeat thread long-polls for new versions, so a published policy
    acts within milliseconds. A version that cannot be loaded (deleted as superseded, torn, or not this
    run's network) is skipped rather than retried every step.

    Versions only grow, with one exception: a coordinator whose node crashed can come back with a journal that
    lost its newest commits, a publish among them (a journal on synchronous=NORMAL survives a killed process,
    not a lost node). It then refuses every chunk made with the version it no longer knows ("never
    published"). A directive naming a policy other than the held one and not newer is either that rollback or
    a stale reply (computed before the held version was published, arriving after a newer one); a fresh
    heartbeat tells them apart: sent after the held version was loaded, its reply names that version or a newer
    one unless the coordinator lost it. On a rollback the collector re-syncs to the coordinator's latest."""

    def __init__(self, session: WorkerSession, store: PayloadStore, rollout: Rollout) -> None:
        self.session, self.store, self.rollout = session, store, rollout
        self.held: PolicyRef | None = None  # the policy the rollout acts with
        self.refused: PolicyRef | None = None  # the last one that could not be loaded

    @property
    def version(self) -> int:
        """The version the rollout acts with (0: none yet)."""
        return self.rollout.version

    def refresh(self) -> None:
        ref = self.session.directive.policy
        if ref is None or ref in (self.held, self.refused):
            return
        if self.held is not None and ref.version <= self.held.version:
            ref = self.rolled_back()
            if ref is None or ref == self.refused:
                return
        try:
            self.rollout.load_policy(*load_policy(self.store, ref), version=ref.version)
        except (FileNotFoundError, IntegrityError, ManifestError, PolicyError) as exc:
            log.warning("could not load policy v%d: %s", ref.version, exc)
            self.refused = ref
            return
        self.held = ref
        log.info("acting with policy v%d", ref.version)

    def rolled_back(self) -> PolicyRef | None:
        """The coordinator's latest policy when it lost the held one (see the class doc), confirmed by a fresh
        heartbeat; None when the directive was only stale, or names the held policy or a newer one."""
        held, ref = self.held, self.session.directive.policy
        if held is None or ref is None or ref == held or ref.version > held.version:
            return None
        latest = self.session.heartbeat().policy
        if latest is None or latest == held or latest.version > held.version:
            return None  # stale; or the coordinator has no policy left at all: the learner publishes one again
        log.warning("the coordinator's latest policy is v%d, not v%d this collector acts with: it lost v%d "
                    "(its journal rolled back after a crash) and refuses chunks made with it; acting with v%d",
                    latest.version, held.version, held.version, latest.version)
        return latest


def _await_lockstep_policy(session: WorkerSession, follower: PolicyFollower) -> None:
    """Deterministic run: the next chunk must be acted with the policy trained on the last one, however long
    the learner takes (long polls, each bounded; a stopped run ends the wait), or with the coordinator's latest
    once it lost the one the last chunk was acted with (`PolicyFollower.rolled_back`)."""
    version = follower.version
    while session.running:
        policy = session.directive.policy
        if policy is not None and (policy.version > version or follower.rolled_back() is not None):
            return
        session.heartbeat(newer_than=version, wait=SYNC_WAIT_SECONDS)


class SyncWait:
    """force_sync: after a chunk made with policy `version`, wait for the policy trained on it, however long the
    learner's update takes, so the next chunk is never made with a policy about to be superseded (its chunk would
    be discarded as stale, lag 1 > max_policy_lag 0; with a 2-s wait and 10-s Pong updates 58-63% of all chunks
    were).

    The wait is a loop of long-polled heartbeats, each bounded (the session clamps them to the coordinator's
    `max_wait_seconds`), that ends on a newer policy, on the run stopping, on the coordinator having lost the policy
    the chunk was made with (`PolicyFollower.rolled_back`), or after `bound()` seconds. The bound is there for the
    rounds in which no newer policy will come: the learner restarted and lost the batch it had taken (it resumes from
    a checkpoint and trains only on new data), or the learner waits for a batch this collector's chunks alone do not
    fill while another collector is gone. Fresh data made with the same version then is lag 0 again, so the
    collector says why and collects again. The bound is `ROUND_FACTOR` times the longest round this collector has
    seen, from its chunk's acknowledgement to the newer policy (the learner's update and its wait for the other
    collectors' chunks), at least `MIN_BOUND_SECONDS`; before any round is measured `FIRST_BOUND_SECONDS`, enough for
    a learner's first update (torch's start-up, a CNN on one busy core)."""

    FIRST_BOUND_SECONDS = 300.0
    MIN_BOUND_SECONDS = 10.0
    ROUND_FACTOR = 4.0

    def __init__(self, session: WorkerSession, follower: PolicyFollower) -> None:
        self.session, self.follower = session, follower
        self.longest = 0.0  # seconds of the longest round that ended with a newer policy
        self.gave_up = 0  # rounds that ended at the bound: collected again with the same version

    def bound(self) -> float:
        if self.longest == 0.0:
            return self.FIRST_BOUND_SECONDS
        return max(self.MIN_BOUND_SECONDS, self.ROUND_FACTOR * self.longest)

    def await_newer(self, version: int) -> None:
        """Wait for a policy newer than `version` (0: none yet; on-policy learners publish their initial policy
        first, so all data of a round comes from one policy)."""
        session, bound, start = self.session, self.bound(), time.monotonic()
        while session.running:
            policy = session.directive.policy
            if policy is not None and policy.version > version:
                if version > 0:
                    self.longest = max(self.longest, time.monotonic() - start)
                return
            if self.follower.rolled_back() is not None:
                return
            left = bound - (time.monotonic() - start)
            if left <= 0:
                self.gave_up += 1
                log.warning("no policy newer than v%d after %.0f s (%g times the longest round so far, %.1f s): the "
                            "learner may have lost the batch it took, or waits for chunks another collector no "
                            "longer sends; collecting again with v%d (%d such rounds)", version, bound,
                            self.ROUND_FACTOR, self.longest, version, self.gave_up)
                return
            session.heartbeat(newer_than=version, wait=min(SYNC_WAIT_SECONDS, left))


def _reread(session: WorkerSession, task: CollectorTask) -> CollectorTask:
    """The task this collector holds, as the coordinator now describes it (live settings applied). Only its
    behaviour is taken up: the envs and their seeds stay as they are."""
    fresh = session.claim()
    if isinstance(fresh, CollectorTask) and fresh.task_id == task.task_id:
        log.info("task %s: live settings changed; exploration now %s", task.task_id, fresh.behaviour.epsilon)
        return fresh
    return task  # the run ended, or the lease was lost meanwhile: the loop's own checks end this task


def run_collector(settings: WorkerSettings) -> int:
    return run_worker(settings, "collector", _claim_and_collect)


def _claim_and_collect(session: WorkerSession, layout: RunLayout) -> None:
    store = open_store(layout, "store")
    for task in session.tasks(CollectorTask):
        work = WORK[task.work]
        if work is None:
            log.info("this run trains on a recorded dataset: nothing to collect, the collector exits")
            return
        work(session, store, task)


def _collect(session: WorkerSession, store: PayloadStore, task: CollectorTask) -> None:
    generation = session.generation
    behaviour = task.behaviour
    rollout = Rollout(task.env, task.collector.num_envs, task.spaces, behaviour, task.seed,
                      backend=task.collector.env_backend, double_buffer=task.collector.double_buffer)
    uploader = Uploader(session, store, report_batch=task.collector.report_batch,
                        report_delay_seconds=task.collector.report_delay_seconds, max_body_bytes=task.max_body_bytes,
                        compression=task.collector.payload_compression(rollout.schema.stack is not None))
    sync = task.sampling.force_sync or task.lockstep
    follower = PolicyFollower(session, store, rollout)
    sync_wait = SyncWait(session, follower)
    # The version the last chunk was made with: force_sync waits for a newer one, and before the first chunk for any
    # (a collector that starts after the learner's first publish collects with it at once).
    made = 0
    draw = None if task.self_play is None else OpponentDraw(session, store, rollout, task.self_play, task.seed)

    def refresh() -> None:
        follower.refresh()
        if draw is not None:
            draw.refresh()  # a new latest version plays the other seat from the next game on

    refresh()
    log.info("task %s: %d x %s (%s%s), chunks of %d steps", task.task_id, task.collector.num_envs, task.env.id,
             task.collector.env_backend, ", double-buffered" if task.collector.double_buffer else "",
             task.collector.chunk_steps)
    settings = session.directive.settings
    try:
        while session.running and session.generation == generation:
            directive = session.directive
            if directive.settings > settings:  # an operator changed a live setting: re-read the task
                settings = directive.settings
                behaviour = _reread(session, task).behaviour
            if directive.pause_seconds > 0:
                session.wait_out_pause()
                refresh()  # resume with the newest policy, already loaded
                continue
            if task.lockstep:
                _await_lockstep_policy(session, follower)
            elif sync:
                sync_wait.await_newer(made)
            refresh()
            if behaviour.sample and rollout.actor is None:
                session.heartbeat(newer_than=0, wait=SYNC_WAIT_SECONDS)  # log-probs need the learner's policy
                continue
            steps = directive.env_steps_total
            epsilon = behaviour.epsilon.value(steps) if behaviour.epsilon is not None else 0.0
            chunk = rollout.collect(task.collector.chunk_steps, epsilon, task.sampling.n_episode,
                                    refresh=None if sync else refresh,
                                    random=steps < behaviour.random_env_steps)
            made = rollout.version
            uploader.submit(Pending(chunk, task.task_id))
            if sync:
                uploader.flush()  # acknowledged before we look for the policy trained on it
    finally:
        uploader.close()
        rollout.close()


# What a collector does for the work its task names (CollectorTask.work: the run's loop kind decides it,
# shared/loops/); None: the run needs no collector, which exits.
WORK: dict[CollectorWork, Callable[[WorkerSession, PayloadStore, CollectorTask], None] | None] = {
    "chunks": _collect, "members": evaluate_members, "none": None}
