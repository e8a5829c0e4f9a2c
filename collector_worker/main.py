"""The collector process: register, claim a task, then collect chunks until the run ends (or, for a
population-based learner, evaluate the members of its generations: collector_worker/members.py).

Policy updates arrive in every reply's directive (and at once through the heartbeat's long poll); the
collector loads a new version (sha256-checked) before the next env step. A pause directive (the rate
limiter, or the operator) idles the envs in a heartbeat long poll that the resume answers. With force_sync
the collector works in lockstep with the learner.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from collector_worker.members import evaluate_members
from collector_worker.opponents import OpponentDraw
from collector_worker.rollout import Rollout
from collector_worker.uploader import Pending, Uploader
from shared.loops.kind import CollectorWork
from shared.policy.actors import PolicyError
from shared.policy.files import load_policy
from shared.policy.manifest import ManifestError
from shared.storage.factory import open_store
from shared.storage.layout import RunLayout
from shared.storage.protocol import IntegrityError, PayloadStore
from shared.wire import CollectorTask
from shared.worker.lifecycle import run_worker
from shared.worker.session import WorkerSession
from shared.worker.settings import WorkerSettings

log = logging.getLogger("rlfleet.collector")
SYNC_WAIT_SECONDS = 2.0


class PolicyFollower:
    """Loads each newer policy version named by the directive into the rollout (sha256-checked), once.

    Checked before every env step: the heartbeat thread long-polls for new versions, so a published policy
    acts within milliseconds. A version that cannot be loaded (deleted as superseded, torn, or not this
    run's network) is skipped rather than retried every step."""

    def __init__(self, session: WorkerSession, store: PayloadStore, rollout: Rollout) -> None:
        self.session, self.store, self.rollout = session, store, rollout
        self.refused = 0

    def refresh(self) -> None:
        ref = self.session.directive.policy
        if ref is None or ref.version <= max(self.rollout.version, self.refused):
            return
        try:
            self.rollout.load_policy(*load_policy(self.store, ref), version=ref.version)
        except (FileNotFoundError, IntegrityError, ManifestError, PolicyError) as exc:
            log.warning("could not load policy v%d: %s", ref.version, exc)
            self.refused = ref.version
            return
        log.info("acting with policy v%d", ref.version)


def _await_lockstep_policy(session: WorkerSession, version: int) -> None:
    """Deterministic run: the next chunk must be acted with the policy trained on the last one, however long
    the learner takes (long polls, each bounded; a stopped run ends the wait)."""
    while session.running and (session.directive.policy is None or session.directive.policy.version <= version):
        session.heartbeat(newer_than=version, wait=SYNC_WAIT_SECONDS)


def _await_newer_policy(session: WorkerSession, version: int) -> None:
    """force_sync: after a chunk made with policy `version`, wait for a newer one (a long-polled heartbeat).

    Version 0 (no policy yet) waits too: on-policy learners publish their initial policy first, so all data
    of a round comes from one policy. The wait is bounded (and clamped to the coordinator's `max_wait_seconds` by
    the session): if no newer policy comes (say the learner restarted and lost the batch it had taken), fresh
    data from the same version is still lag 0, so collect again."""
    policy = session.directive.policy
    if policy is None or policy.version <= version:
        session.heartbeat(newer_than=version, wait=SYNC_WAIT_SECONDS)


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
    rollout = Rollout(task.env, task.collector.num_envs, task.spaces, behaviour, task.seed)
    uploader = Uploader(session, store, report_batch=task.collector.report_batch,
                        report_delay_seconds=task.collector.report_delay_seconds, max_body_bytes=task.max_body_bytes)
    sync = task.sampling.force_sync or task.lockstep
    follower = PolicyFollower(session, store, rollout)
    draw = None if task.self_play is None else OpponentDraw(session, store, rollout, task.self_play, task.seed)

    def refresh() -> None:
        follower.refresh()
        if draw is not None:
            draw.refresh()  # a new latest version plays the other seat from the next game on

    refresh()
    log.info("task %s: %d x %s, chunks of %d steps", task.task_id, task.collector.num_envs, task.env.id,
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
            if sync:
                (_await_lockstep_policy if task.lockstep else _await_newer_policy)(session, rollout.version)
            refresh()
            if behaviour.sample and rollout.actor is None:
                session.heartbeat(newer_than=0, wait=SYNC_WAIT_SECONDS)  # log-probs need the learner's policy
                continue
            steps = directive.env_steps_total
            epsilon = behaviour.epsilon.value(steps) if behaviour.epsilon is not None else 0.0
            chunk = rollout.collect(task.collector.chunk_steps, epsilon, task.sampling.n_episode,
                                    refresh=None if sync else refresh,
                                    random=steps < behaviour.random_env_steps)
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
