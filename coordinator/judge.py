"""Validations, held-out tests and the solve rule: evaluators report episodes; the judge decides 'solved'.

A validation (every policy version, `evaluation.episodes` episodes on validation seeds) only nominates: when
it reaches the threshold, beats the test score of every candidate tested so far, and no test is in flight,
the reply asks the evaluator to run the held-out test of that version (`evaluation.test_episodes` on test
seeds, disjoint from every training and validation seed). The run is solved only when such a test's mean
reaches the threshold; a test that falls short is counted as a rejected validation pass and training goes on.
So a lucky 10-episode validation can no longer end a run, and at most one test runs at a time (in the
evaluator's process, never the learner's): tests never starve training.

Reports must hold exactly the configured number of episodes, of a published version (a test: of the version
asked for); a retried report (same request id) gets the first result and is counted once. Validations are
journalled as rows, tests and the pending request in the judge's own meta key.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from coordinator import journal as jr
from coordinator.committer import Statement
from coordinator.errors import Conflict, Invalid
from coordinator.journal import Snapshot
from shared.config import EnvConfig, EvalConfig
from shared.stats import ci95
from shared.wire import EvaluationReport, EvaluationResult, HoldoutReport, HoldoutResult


class Judge:
    def __init__(self, env: EnvConfig, evaluation: EvalConfig) -> None:
        self.threshold = env.solve_threshold
        self.episodes, self.test_episodes = evaluation.episodes, evaluation.test_episodes
        self.results: list[EvaluationResult] = []
        self.best: EvaluationResult | None = None
        self.tests: list[HoldoutResult] = []
        self.pending: tuple[int, float, str] | None = None  # (version, validation mean, evaluator) under test
        self._by_request: dict[str, EvaluationResult] = {}
        self._tests_by_request: dict[str, HoldoutResult] = {}
        self.force_test = False  # an operator asked for a test of the next version validated, whatever its score

    @property
    def latest(self) -> EvaluationResult | None:
        return self.results[-1] if self.results else None

    @property
    def confirmed(self) -> HoldoutResult | None:
        return next((t for t in self.tests if t.confirmed), None)

    @property
    def rejected(self) -> int:
        return sum(not t.confirmed for t in self.tests)

    def retried(self, request_id: str | None) -> EvaluationResult | None:
        return self._by_request.get(request_id) if request_id else None

    def retried_test(self, request_id: str | None) -> HoldoutResult | None:
        return self._tests_by_request.get(request_id) if request_id else None

    def judge(self, report: EvaluationReport, latest_version: int, env_steps: int, wall_seconds: float,
              iteration: int, alive: Callable[[str], bool]) -> tuple[EvaluationResult, list[Statement]]:
        """Record a validation; nominate its version for a test when it deserves one."""
        mean, std = self._check(report.returns, report.lengths, self.episodes, "evaluation.episodes")
        if report.policy_version > latest_version:
            raise Invalid(f"policy version {report.policy_version} was never published (latest: {latest_version})")
        if self.pending is not None and not alive(self.pending[2]):
            self.pending = None  # its evaluator died mid-test: the candidate may be nominated again
        passes = mean >= self.threshold
        # Measured by their tests, not by the validations that nominated them: a lucky validation must not
        # lock out every later candidate (measured: one -116 validation of a -202 policy kept Pendulum's
        # -170 policies from ever being tested until the budget ran out).
        tested = max((t.mean for t in self.tests), default=-math.inf)
        deserves = passes and mean > tested
        request = (deserves or self.force_test) and self.pending is None and self.confirmed is None
        self.force_test = self.force_test and not request
        result = EvaluationResult(
            policy_version=report.policy_version, mean=mean, std=std, episodes=len(report.returns),
            env_steps=env_steps, wall_seconds=wall_seconds, iteration=iteration, seed=report.seed, solved=passes,
            test_requested=request)
        if request:
            self.pending = (report.policy_version, mean, report.worker_id)
        self._add(result, report.request_id)
        return result, [jr.evaluation_row(result.model_dump_json(), report.request_id)]

    def test(self, report: HoldoutReport, env_steps: int, wall_seconds: float, iteration: int) -> HoldoutResult:
        """Record the held-out test that was asked for; it confirms the candidate or rejects it."""
        if self.pending is None or self.pending[0] != report.policy_version:
            asked = f"v{self.pending[0]}" if self.pending else "none"
            raise Conflict(f"no held-out test of policy v{report.policy_version} was requested (requested: {asked})")
        mean, std = self._check(report.returns, report.lengths, self.test_episodes, "evaluation.test_episodes")
        result = HoldoutResult(
            policy_version=report.policy_version, mean=mean, std=std, ci95=ci95(mean, std, len(report.returns)),
            episodes=len(report.returns), validation_mean=self.pending[1], env_steps=env_steps,
            wall_seconds=wall_seconds, iteration=iteration, seed=report.seed, confirmed=mean >= self.threshold)
        self.pending = None
        self.tests.append(result)
        if report.request_id:
            self._tests_by_request[report.request_id] = result
        return result

    def _check(self, returns: list[float], lengths: list[int], episodes: int, field: str) -> tuple[float, float]:
        if len(returns) != len(lengths):
            raise Invalid("returns and lengths must have the same number of episodes")
        if len(returns) != episodes:
            raise Invalid(f"a report must hold {field}={episodes} episodes, got {len(returns)}")
        values = np.asarray(returns, dtype=np.float64)
        return float(values.mean()), float(values.std())

    def _add(self, result: EvaluationResult, request_id: str | None) -> None:
        self.results.append(result)
        if request_id:
            self._by_request[request_id] = result
        if self.best is None or result.mean > self.best.mean:
            self.best = result

    def state_dict(self) -> dict:
        return {"tests": [t.model_dump(mode="json") for t in self.tests], "pending": self.pending,
                "force_test": self.force_test,
                "test_requests": {k: i for i, t in enumerate(self.tests) for k, v in self._tests_by_request.items()
                                  if v is t}}

    def load(self, snap: Snapshot, state: dict | None) -> None:
        for body, request_id in snap.evaluations:
            self._add(EvaluationResult.model_validate_json(body), request_id)
        if state is None:  # a journal from before held-out tests
            return
        self.tests = [HoldoutResult.model_validate(t) for t in state["tests"]]
        self.pending = tuple(state["pending"]) if state["pending"] else None  # type: ignore[assignment]
        self.force_test = bool(state.get("force_test", False))
        self._tests_by_request = {k: self.tests[i] for k, i in state["test_requests"].items()}
