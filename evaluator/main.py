"""The evaluator process: evaluate each new policy version greedily, report it, keep the best one.

The actor is built from the policy file's manifest alone (shared/actors.py): the evaluator knows no algorithm.

It watches `GET /v1/policies/latest` with an ETag (a 304 costs next to nothing), so a new version is
evaluated within a fraction of a second; versions published while an evaluation runs are skipped in favour
of the newest. The coordinator, not the evaluator, decides whether the run is solved.
"""

from __future__ import annotations

import json
import logging
import os
import uuid

from evaluator.episodes import evaluate
from shared.actors import PolicyError, build_actor
from shared.layout import RunLayout
from shared.manifest import ManifestError
from shared.policy_io import load_policy
from shared.session import WorkerSession
from shared.settings import WorkerSettings
from shared.store import IntegrityError, LocalStore, atomic_write
from shared.wire import EvaluationReport, EvaluationResult, EvaluatorTask, PolicyRef
from shared.worker import run_worker

log = logging.getLogger("rlfleet.evaluator")
POLL_SECONDS = 0.2
EVALUATOR_NICENESS = 10


def run_evaluator(settings: WorkerSettings) -> int:
    # Evaluation must not slow training: on a shared host the learner and collectors get the CPU first.
    os.nice(EVALUATOR_NICENESS)
    return run_worker(settings, "evaluator", _claim_and_evaluate)


def _claim_and_evaluate(session: WorkerSession, layout: RunLayout) -> None:
    task = session.claim()
    if not isinstance(task, EvaluatorTask):
        return  # the run ended before a task was free
    store = LocalStore(layout.store_root)
    best = float("-inf")
    evaluated = 0
    etag = ""
    while session.running:
        ref, etag = session.client.poll("/v1/policies/latest", PolicyRef, etag)
        if ref is None or ref.version <= evaluated:
            session.stop_event.wait(POLL_SECONDS)
            continue
        try:
            manifest, state = load_policy(store, ref)
            if manifest.spaces != task.spaces:
                raise PolicyError(f"policy made for {manifest.spaces}, the run's env has {task.spaces}")
            actor = build_actor(manifest, state)
        except (FileNotFoundError, IntegrityError, ManifestError, PolicyError) as exc:
            log.warning("policy v%d unreadable (%s); waiting for the next", ref.version, exc)
            evaluated = ref.version
            continue
        returns, lengths = evaluate(actor.greedy, task.env, task.evaluation.num_envs, task.evaluation.episodes,
                                    task.seed + ref.version)
        result = report_evaluation(session, ref.version, returns, lengths)
        evaluated = ref.version
        log.info("policy v%d: mean %.1f ± %.1f over %d episodes", ref.version, result.mean, result.std,
                 result.episodes)
        if result.mean > best:
            best = result.mean
            _keep_best(store, layout, ref, result)


def report_evaluation(session: WorkerSession, version: int, returns: list[float], lengths: list[int]
                      ) -> EvaluationResult:
    """POST one evaluation. Its id is fixed before the first try, so a retry after a lost reply is answered
    with the first result instead of recording the same episodes twice."""
    return session.client.call("POST", "/v1/evaluations", EvaluationResult, EvaluationReport(
        worker_id=session.worker_id, request_id=uuid.uuid4().hex, policy_version=version, returns=returns,
        lengths=lengths))


def _keep_best(store: LocalStore, layout: RunLayout, ref: PolicyRef, result: EvaluationResult) -> None:
    try:
        data = store.get(ref.path, ref.sha256)
    except (FileNotFoundError, IntegrityError) as exc:
        log.warning("could not keep policy v%d as best: %s", ref.version, exc)
        return
    atomic_write(layout.best / "policy.safetensors", data)
    atomic_write(layout.best / "score.json", json.dumps(result.model_dump(), indent=2).encode())
