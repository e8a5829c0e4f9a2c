"""The collector process: register, claim a task, then collect chunks until the run ends.

Policy updates arrive in every reply's directive; the collector loads a new version (sha256-checked) between
chunks, only when the version changed. A pause directive (the rate limiter) idles the envs cheaply.
"""

from __future__ import annotations

import logging

from collector_worker.rollout import Rollout
from collector_worker.uploader import Pending, Uploader
from shared.layout import RunLayout
from shared.policy_io import load_policy
from shared.session import WorkerSession
from shared.settings import WorkerSettings
from shared.store import IntegrityError, LocalStore
from shared.wire import CollectorTask, PolicyRef
from shared.worker import run_worker

log = logging.getLogger("rlfleet.collector")
SYNC_WAIT_SECONDS = 2.0


def _maybe_load(rollout: Rollout, store: LocalStore, current: int, ref: PolicyRef | None) -> int:
    if ref is None or ref.version <= current:
        return current
    try:
        rollout.load_state(load_policy(store, ref))
    except (FileNotFoundError, IntegrityError) as exc:  # superseded and deleted, or torn: keep the old one
        log.warning("could not load policy v%d: %s", ref.version, exc)
        return current
    return ref.version


def _await_newer_policy(session: WorkerSession, version: int) -> None:
    """force_sync: after a chunk made with policy `version`, wait for a newer one (a long-polled heartbeat).

    Version 0 (no policy yet) waits too: the PPO learner publishes its initial policy first, so all data of
    a round comes from one policy. The wait is bounded: if no newer policy comes (say the learner restarted
    and lost the batch it had taken), fresh data from the same version is still lag 0, so collect again."""
    policy = session.directive.policy
    if policy is None or policy.version <= version:
        session.heartbeat(newer_than=version, wait=SYNC_WAIT_SECONDS)


def run_collector(settings: WorkerSettings) -> int:
    return run_worker(settings, "collector", _claim_and_collect)


def _claim_and_collect(session: WorkerSession, layout: RunLayout) -> None:
    store = LocalStore(layout.store_root)
    for task in session.tasks(CollectorTask):
        _collect(session, store, task)


def _collect(session: WorkerSession, store: LocalStore, task: CollectorTask) -> None:
    generation = session.generation
    rollout = Rollout(task.env.id, task.collector.num_envs, task.net, task.seed, sample=task.algo == "ppo")
    uploader = Uploader(session, store)
    sync = task.sampling.force_sync
    version = _maybe_load(rollout, store, 0, task.policy)
    log.info("task %s: %d x %s, chunks of %d steps", task.task_id, task.collector.num_envs, task.env.id,
             task.collector.chunk_steps)
    try:
        while session.running and session.generation == generation:
            directive = session.directive
            if directive.pause_seconds > 0:
                session.stop_event.wait(directive.pause_seconds)
                session.heartbeat()
                continue
            if sync:
                _await_newer_policy(session, version)
                directive = session.directive
            version = _maybe_load(rollout, store, version, directive.policy)
            epsilon = task.collector.epsilon.value(directive.env_steps_total) if task.algo == "dqn" else 0.0
            chunk = rollout.collect(task.collector.chunk_steps, epsilon, task.sampling.n_episode)
            uploader.submit(Pending(chunk, task.task_id, version))
            if sync:
                uploader.flush()  # acknowledged before we look for the policy trained on it
    finally:
        uploader.close()
        rollout.close()
