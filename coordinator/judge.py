"""Evaluations and the solve rule: the evaluator reports episodes; the judge decides 'solved'.

A report must hold exactly the configured number of episodes (one lucky episode cannot end a run), of a
published policy version; a retried report (same request id) gets the first result and is counted once.
"""

from __future__ import annotations

import numpy as np

from coordinator import journal as jr
from coordinator.committer import Statement
from coordinator.errors import Invalid
from coordinator.journal import Snapshot
from shared.config import EnvConfig, EvalConfig
from shared.wire import EvaluationReport, EvaluationResult


class Judge:
    def __init__(self, env: EnvConfig, evaluation: EvalConfig) -> None:
        self.threshold = env.solve_threshold
        self.episodes = evaluation.episodes
        self.results: list[EvaluationResult] = []
        self.best: EvaluationResult | None = None
        self._by_request: dict[str, EvaluationResult] = {}

    @property
    def latest(self) -> EvaluationResult | None:
        return self.results[-1] if self.results else None

    def retried(self, request_id: str | None) -> EvaluationResult | None:
        return self._by_request.get(request_id) if request_id else None

    def judge(self, report: EvaluationReport, latest_version: int, env_steps: int,
              wall_seconds: float) -> tuple[EvaluationResult, list[Statement]]:
        if len(report.returns) != len(report.lengths):
            raise Invalid("returns and lengths must have the same number of episodes")
        if len(report.returns) != self.episodes:
            raise Invalid(f"an evaluation must hold evaluation.episodes={self.episodes} episodes, got "
                          f"{len(report.returns)}")
        if report.policy_version > latest_version:
            raise Invalid(f"policy version {report.policy_version} was never published (latest: {latest_version})")
        returns = np.asarray(report.returns, dtype=np.float64)
        mean = float(returns.mean())
        result = EvaluationResult(
            policy_version=report.policy_version, mean=mean, std=float(returns.std()), episodes=len(returns),
            env_steps=env_steps, wall_seconds=wall_seconds, solved=mean >= self.threshold)
        self._add(result, report.request_id)
        return result, [jr.evaluation_row(result.model_dump_json(), report.request_id)]

    def _add(self, result: EvaluationResult, request_id: str | None) -> None:
        self.results.append(result)
        if request_id:
            self._by_request[request_id] = result
        if self.best is None or result.mean > self.best.mean:
            self.best = result

    def load(self, snap: Snapshot) -> None:
        for body, request_id in snap.evaluations:
            self._add(EvaluationResult.model_validate_json(body), request_id)
