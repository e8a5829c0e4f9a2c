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


def _maybe_load(rollout: Rollout, store: LocalStore, current: int, ref: PolicyRef | None) -> int:
    if ref is None or ref.version <= current:
        return current
    try:
        rollout.load_state(load_policy(store, ref))
    except (FileNotFoundError, IntegrityError) as exc:  # superseded and deleted, or torn: keep the old one
        log.warning("could not load policy v%d: %s", ref.version, exc)
        return current
    return ref.version


def run_collector(settings: WorkerSettings) -> int:
    return run_worker(settings, "collector", _claim_and_collect)


def _claim_and_collect(session: WorkerSession, layout: RunLayout) -> None:
    store = LocalStore(layout.store_root)
    for task in session.tasks(CollectorTask):
        _collect(session, store, task)


def _collect(session: WorkerSession, store: LocalStore, task: CollectorTask) -> None:
    generation = session.generation
    rollout = Rollout(task.env.id, task.collector.num_envs, task.hidden, task.seed)
    uploader = Uploader(session, store)
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
            version = _maybe_load(rollout, store, version, directive.policy)
            epsilon = task.collector.epsilon.value(directive.env_steps_total)
            chunk = rollout.collect(task.collector.chunk_steps, epsilon)
            uploader.submit(Pending(chunk, task.task_id, version))
    finally:
        uploader.close()
        rollout.close()
