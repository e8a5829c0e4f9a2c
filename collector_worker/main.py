"""The collector process: register, claim a task, then collect chunks until the run ends.

Policy updates arrive in every reply's directive; the collector loads a new version (sha256-checked) between
chunks, only when the version changed. A pause directive (the rate limiter) idles the envs cheaply.
"""

from __future__ import annotations

import logging

import torch

from collector_worker.rollout import Rollout
from collector_worker.uploader import Pending, Uploader
from shared.client import CoordinatorClient, CoordinatorUnavailable, Stopped
from shared.layout import RunLayout
from shared.policy_io import load_policy
from shared.session import WorkerSession
from shared.settings import WorkerSettings
from shared.store import IntegrityError, LocalStore
from shared.wire import CollectorTask, PolicyRef

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
    torch.set_num_threads(settings.torch_threads)
    client = CoordinatorClient(settings.coordinator_url, settings.resolve_token("collector"),
                               timeout=settings.http_timeout_seconds,
                               max_unavailable_seconds=settings.max_unavailable_seconds)
    session = WorkerSession(client, "collector", settings.worker_name)
    try:
        session.register()
        session.start_heartbeats()
        store = LocalStore(RunLayout(settings.data_dir, session.run_name).store_root)
        while session.running:
            task = session.claim()
            if task is None:
                break
            if not isinstance(task, CollectorTask):
                raise RuntimeError(f"collector was given a {task.kind} task")
            _collect(session, store, task)
    except Stopped:
        pass
    except CoordinatorUnavailable as exc:
        log.error("%s", exc)
        return 2
    finally:
        session.close()
    if session.fatal is not None:
        return 2
    log.info("collector done: run %s", session.directive.run_state)
    return 0


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
