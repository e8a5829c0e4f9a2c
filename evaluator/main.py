"""The evaluator process: evaluate each new policy version greedily, report it, keep the best one.

It watches `GET /v1/policies/latest` with an ETag (a 304 costs next to nothing), so a new version is
evaluated within a fraction of a second; versions published while an evaluation runs are skipped in favour
of the newest. The coordinator, not the evaluator, decides whether the run is solved.
"""

from __future__ import annotations

import json
import logging

import httpx
import torch

from evaluator.episodes import evaluate
from shared.client import CoordinatorClient, CoordinatorUnavailable, Stopped
from shared.envs import make_vector_env, space_dims
from shared.layout import RunLayout
from shared.nets import q_network
from shared.policy_io import load_policy
from shared.session import WorkerSession
from shared.settings import WorkerSettings
from shared.store import IntegrityError, LocalStore, atomic_write
from shared.wire import EvaluationReport, EvaluationResult, EvaluatorTask, PolicyRef

log = logging.getLogger("rlfleet.evaluator")
POLL_SECONDS = 0.2


def run_evaluator(settings: WorkerSettings) -> int:
    torch.set_num_threads(settings.torch_threads)
    token = settings.resolve_token("evaluator")
    client = CoordinatorClient(settings.coordinator_url, token, timeout=settings.http_timeout_seconds,
                               max_unavailable_seconds=settings.max_unavailable_seconds)
    session = WorkerSession(client, "evaluator", settings.worker_name)
    try:
        session.register()
        session.start_heartbeats()
        layout = RunLayout(settings.data_dir, session.run_name)
        task = session.claim()
        if isinstance(task, EvaluatorTask):
            _evaluate_versions(session, layout, task, settings, token)
    except Stopped:
        pass
    except CoordinatorUnavailable as exc:
        log.error("%s", exc)
        return 2
    finally:
        session.close()
    return 2 if session.fatal is not None else 0


def _evaluate_versions(session: WorkerSession, layout: RunLayout, task: EvaluatorTask, settings: WorkerSettings,
                       token: str) -> None:
    store = LocalStore(layout.store_root)
    probe = make_vector_env(task.env.id, 1)
    net = q_network(*space_dims(probe), task.hidden)
    probe.close()
    best = float("-inf")
    evaluated = 0
    etag = ""
    with httpx.Client(base_url=settings.coordinator_url, timeout=settings.http_timeout_seconds,
                      headers={"Authorization": f"Bearer {token}"}) as http:
        while session.running:
            ref, etag = _latest(http, etag)
            if ref is None or ref.version <= evaluated:
                session.stop_event.wait(POLL_SECONDS)
                continue
            try:
                net.load_state_dict(load_policy(store, ref))
            except (FileNotFoundError, IntegrityError) as exc:
                log.warning("policy v%d unreadable (%s); waiting for the next", ref.version, exc)
                evaluated = ref.version
                continue
            returns, lengths = evaluate(net, task.env.id, task.evaluation.num_envs, task.evaluation.episodes,
                                        task.seed + ref.version)
            result = session.client.call("POST", "/v1/evaluations", EvaluationResult, EvaluationReport(
                worker_id=session.worker_id, policy_version=ref.version, returns=returns, lengths=lengths))
            evaluated = ref.version
            log.info("policy v%d: mean %.1f ± %.1f over %d episodes", ref.version, result.mean, result.std,
                     result.episodes)
            if result.mean > best:
                best = result.mean
                _keep_best(store, layout, ref, result)


def _latest(http: httpx.Client, etag: str) -> tuple[PolicyRef | None, str]:
    """The latest policy if it changed since `etag`; transient failures count as 'no change'."""
    try:
        resp = http.get("/v1/policies/latest", headers={"If-None-Match": etag} if etag else None)
    except httpx.TransportError:
        return None, etag
    if resp.status_code != 200:
        return None, etag
    try:
        return PolicyRef.model_validate_json(resp.content), resp.headers.get("ETag", "")
    except ValueError:
        return None, etag


def _keep_best(store: LocalStore, layout: RunLayout, ref: PolicyRef, result: EvaluationResult) -> None:
    try:
        data = store.get(ref.path, ref.sha256)
    except (FileNotFoundError, IntegrityError) as exc:
        log.warning("could not keep policy v%d as best: %s", ref.version, exc)
        return
    atomic_write(layout.best / "policy.safetensors", data)
    atomic_write(layout.best / "score.json", json.dumps(result.model_dump(), indent=2).encode())
