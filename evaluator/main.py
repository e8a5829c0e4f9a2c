"""The evaluator process: validate each new policy version greedily, test the candidates, keep the best one.

The actor is built from the policy file's manifest alone (shared/policy/actors.py): the evaluator knows no algorithm.

It watches `GET /v1/policies/latest` with an ETag (a 304 costs next to nothing), so a new version is
evaluated within a fraction of a second; versions published while an evaluation runs are skipped in favour
of the newest. When a validation reply asks for it, the evaluator runs the held-out test of that version (on
test seeds, shared/envs/seeds.py) before validating the next. The coordinator, not the evaluator, decides
whether the run is solved.

`best/` only ever moves to a better validation, across evaluator restarts too: an evaluator starts from the
score stored with best/ (score.json, which names the sha256 of the policy it scores), not from -inf, since
`rlfleet test` tests best/ and a restart must not replace a good policy by the first poor validation after it.
best/ is the durable record of itself: it lives in the run's store (a shared directory or an object store), so
it survives a restart of the evaluator, of the coordinator, and of the host that ran either. Only when its score
does not describe its policy (a crash between the two writes: the policy, newer and better than the score, went
first; or a best/ from before scores named their policy) does the evaluator take the coordinator's best
validation instead, which no policy ever written to best/ exceeds, since each is validated before it is kept.
whether the run is solved. A run with no threshold asks, once its budget is used up, for the test of its best
validated version (the directive's `final_test`): the evaluator plays it from the copy it kept in the best store
and the run ends when it reports (or asks for the next best's, if a validation under way meanwhile found one).
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from typing import TypeVar

from rlfleet.evaluator.battles import baseline_games, pool_records
from rlfleet.evaluator.episodes import evaluate
from rlfleet.shared import solve_rule
from rlfleet.shared.envs.seeds import base_seed, operator_task
from rlfleet.shared.policy.actors import Actor, PolicyError, build_actor
from rlfleet.shared.policy.files import MAX_POLICY_BYTES, decode_policy
from rlfleet.shared.policy.manifest import ManifestError
from rlfleet.shared.stats import estimate
from rlfleet.shared.storage.factory import open_store
from rlfleet.shared.storage.layout import BEST_POLICY, BEST_SCORE, RunLayout, policy_path
from rlfleet.shared.storage.protocol import IntegrityError, PayloadStore, sha256_hex
from rlfleet.shared.wire import (
    BattleRecord,
    EvaluationReport,
    EvaluationResult,
    EvaluatorTask,
    HoldoutReport,
    HoldoutResult,
    OpponentPool,
    PolicyRef,
    Status,
    rule_met,
    rule_records,
)
from rlfleet.shared.worker.lifecycle import run_worker
from rlfleet.shared.worker.session import WorkerSession
from rlfleet.shared.worker.settings import WorkerSettings

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
    store, best_store = open_store(layout, "store"), open_store(layout, "best")
    best = saved_best(best_store, session)
    evaluated, latest, etag = 0, None, ""
    asked, settings = session.directive.evaluations, session.directive.settings  # earlier requests: done
    final = None  # the end-of-budget test played: a directive older than its reply may still name it
    while session.running:
        directive = session.directive
        if directive.final_test is not None and directive.final_test != final:
            final = directive.final_test
            _final_test(session, task, store, best_store, final)
            continue  # the run ends with that test's report, unless a validation under way found a better best
        if final is not None:
            # Training is over: what is left is the run's end (or another end-of-budget test, if a validation
            # reported meanwhile found a better best). Validating versions now would move `best` past the policy
            # the run tested, after the run judged it.
            session.heartbeat()
            session.stop_event.wait(POLL_SECONDS)
            continue
        if directive.settings > settings:  # an operator changed a live setting (the cadence): re-read the task
            settings, task = directive.settings, _reread(session, task)
        ref, etag = session.client.poll("/v1/policies/latest", PolicyRef, etag)
        latest = ref or latest
        forced = directive.evaluations > asked and latest is not None
        if not forced and (ref is None or ref.version < evaluated + task.evaluation.every_versions):
            session.stop_event.wait(POLL_SECONDS)
            continue
        assert latest is not None
        ref, block = latest, 0
        if forced:
            asked = directive.evaluations
            block = operator_task(asked)
            log.info("validating policy v%d now, as an operator asked", ref.version)
        evaluated = ref.version
        try:
            data = store.get(ref.path, ref.sha256, max_bytes=MAX_POLICY_BYTES)
            manifest, state = decode_policy(data)
            if manifest.spaces != task.spaces:
                raise PolicyError(f"policy made for {manifest.spaces}, the run's env has {task.spaces}")
            actor = build_actor(manifest, state)
        except (FileNotFoundError, IntegrityError, ManifestError, PolicyError) as exc:
            log.warning("policy v%d unreadable (%s); waiting for the next", ref.version, exc)
            continue
        evaluation = task.evaluation
        seed = base_seed(task.seed, "valid", block, ref.version)
        returns, lengths = _games(actor, task, evaluation.episodes, evaluation.num_envs, seed)
        battles = [] if task.self_play is None else pool_records(
            actor, task.env, session.client.call("GET", "/v1/policies/opponents", OpponentPool).pool, store,
            task.self_play, ref.version, evaluation.num_envs, seed)
        result = report(session, "/v1/evaluations", EvaluationResult, EvaluationReport, ref.version, returns, lengths,
                        seed, battles)
        log.info("policy v%d: validation %.3f ± %.3f over %d episodes%s", ref.version, result.mean, result.std,
                 result.episodes, "".join(f"; {b}" for b in result.battles)
                 + (f"; Elo {result.elo:.0f}" if result.elo is not None else ""))
        if result.mean > best:
            best = result.mean
            _keep_best(best_store, data, {"validation": result.model_dump(mode="json")})
        if result.test_requested:
            seed = base_seed(task.seed, "test", block, ref.version)
            returns, lengths = _games(actor, task, evaluation.test_episodes, evaluation.test_num_envs, seed)
            against = evaluation.against
            verdict = None if against else solve_rule.judge(returns, task.env.threshold)
            # The judge's rule, applied here too: the best file is written before reporting, since a confirmed
            # run ends at once and the evaluator may be stopped before the reply.
            if rule_met(against, rule_records(against, returns)) if verdict is None else verdict.confirmed:
                found = estimate(returns)
                _keep_best(best_store, data, {
                    "validation": result.model_dump(mode="json"),
                    "test": {"policy_version": ref.version, "mean": found.mean, "std": found.std,
                             "ci95": found.ci95, "rule": "against" if verdict is None else solve_rule.RULE,
                             "bound": None if verdict is None else verdict.bound, "episodes": found.episodes,
                             "seed": seed}})
            test = report(session, "/v1/tests", HoldoutResult, HoldoutReport, ref.version, returns, lengths, seed)
            log.info("policy v%d: held-out test %.1f ± %.1f over %d episodes (95%% t interval %.1f .. %.1f%s): %s",
                     ref.version, test.mean, test.std, test.episodes, *test.ci95,
                     "" if test.bound is None else f"; re-test lower bound {test.bound:.1f}",
                     "confirmed" if test.confirmed else "rejected")
            if test.confirmed:
                return  # the run is solved: a later, luckier validation must not replace the confirmed best/


def _final_test(session: WorkerSession, task: EvaluatorTask, store: PayloadStore, best_store: PayloadStore,
                version: int) -> None:
    """The end-of-budget test of a run with no threshold: `version`, the best validated."""
    manifest, state = decode_policy(kept_policy(best_store, store, version))
    actor = build_actor(manifest, state)
    evaluation = task.evaluation
    seed = base_seed(task.seed, "test", 0, version)
    log.info("training is over: testing the best policy, v%d, on %d held-out episodes", version,
             evaluation.test_episodes)
    returns, lengths = _games(actor, task, evaluation.test_episodes, evaluation.test_num_envs, seed)
    test = report(session, "/v1/tests", HoldoutResult, HoldoutReport, version, returns, lengths, seed)
    log.info("policy v%d: end-of-budget test %.1f ± %.1f over %d episodes (95%% CI %.1f .. %.1f; no threshold)",
             version, test.mean, test.std, test.episodes, *test.ci95)


def kept_policy(best: PayloadStore, store: PayloadStore, version: int) -> bytes:
    """The file of policy `version` as the run kept it: the best store's copy when its score names that version
    (the evaluator wrote it at the validation), else the policy store's (whose retention spares the best
    validated version). RuntimeError saying what to do when neither holds it."""
    try:
        scores = json.loads(best.get(BEST_SCORE))
        policy = best.get(BEST_POLICY, max_bytes=MAX_POLICY_BYTES)
        # the score must name this policy too: a crash between the two writes leaves a newer policy in best/
        if scores["validation"]["policy_version"] == version and scores.get("policy_sha256") == sha256_hex(policy):
            return policy
    except FileNotFoundError:
        pass  # no validation kept yet (a restarted evaluator on another disk): the policy store's copy
    try:
        return store.get(policy_path(version), max_bytes=MAX_POLICY_BYTES)
    except FileNotFoundError as exc:
        raise RuntimeError(f"policy v{version}, the best validated, is neither in {best.describe()} nor in "
                           f"{store.describe()}: the policy store dropped it before its validation came in, and "
                           f"the evaluator that validated it stopped before keeping it; stop the run (rlfleet ctl "
                           f"stop) and test what it kept with `rlfleet test RUN_DIR`") from exc


def _games(actor: Actor, task: EvaluatorTask, episodes: int, num_envs: int, seed: int
           ) -> tuple[list[float], list[int]]:
    """A validation's or test's episodes; under a battle rule, that many games against each of its baselines."""
    if task.evaluation.against:
        return baseline_games(actor, task.env, task.evaluation.against, episodes, num_envs, seed)
    return evaluate(actor.greedy, task.env, num_envs, episodes, seed, reset=actor.reset)


def _reread(session: WorkerSession, task: EvaluatorTask) -> EvaluatorTask:
    """The evaluator's task as the coordinator now describes it (live settings applied)."""
    fresh = session.claim()
    if isinstance(fresh, EvaluatorTask) and fresh.task_id == task.task_id:
        log.info("live settings changed: validating at most one version in %d", fresh.evaluation.every_versions)
        return fresh
    return task  # the run ended meanwhile: the loop ends


R = TypeVar("R", EvaluationResult, HoldoutResult)


def report(session: WorkerSession, path: str, reply: type[R], model: type[EvaluationReport] | type[HoldoutReport],
           version: int, returns: list[float], lengths: list[int], seed: int,
           battles: list[BattleRecord] | None = None) -> R:
    """POST one validation or test. Its id is fixed before the first try, so a retry after a lost reply is
    answered with the first result instead of recording the same episodes twice."""
    extra = {"battles": battles} if battles else {}
    return session.client.call("POST", path, reply, model(
        worker_id=session.worker_id, request_id=uuid.uuid4().hex, policy_version=version, returns=returns,
        lengths=lengths, seed=seed, **extra))


def saved_best(best: PayloadStore, session: WorkerSession) -> float:
    """The validation mean that a policy must beat to replace best/: the one stored with best/ when its score
    names the policy there, else the coordinator's best validation (see the module docstring); -inf when best/
    is empty."""
    if best.size(BEST_POLICY) is None:
        return float("-inf")
    policy_sha = sha256_hex(best.get(BEST_POLICY, max_bytes=MAX_POLICY_BYTES))
    try:
        scores = json.loads(best.get(BEST_SCORE))
        if scores.get("policy_sha256") == policy_sha:
            mean = float(scores["validation"]["mean"])
            log.info("best/ holds a policy validated at %.3f: only a better validation replaces it", mean)
            return mean
    except (FileNotFoundError, ValueError, KeyError, TypeError, AttributeError):
        pass  # no score, or one that describes nothing: the coordinator's record decides
    coordinator_best = session.client.call("GET", "/v1/status", Status).best_evaluation
    mean = float("-inf") if coordinator_best is None else coordinator_best.mean
    log.warning("best/%s does not score the policy in best/ (the evaluator stopped between writing the two?); "
                "starting from the run's best validation, %.3f", BEST_SCORE, mean)
    return mean


def _keep_best(best: PayloadStore, policy: bytes, scores: dict) -> None:
    """The `best` store: the policy file (weights and manifest) and its scores (validation, and the test once
    confirmed), which name the policy's sha256. Each write is atomic; the policy goes first, so a score never
    names a policy not yet there, and a restart reads a score only when it names the policy it finds."""
    sha256 = best.put(BEST_POLICY, policy)
    best.put(BEST_SCORE, json.dumps({"policy_sha256": sha256, **scores}, indent=2).encode())
