"""The evaluator's reports: validations (which may nominate a version for a held-out test) and held-out tests
(one that confirms ends the run, solved)."""

from __future__ import annotations

from coordinator.operations.context import RunContext
from shared.wire import EvaluationReport, EvaluationResult, HoldoutReport, HoldoutResult


class Evaluations:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def evaluate(self, report: EvaluationReport) -> EvaluationResult:
        ctx = self.ctx
        ctx.fleet.worker(report.worker_id, ctx.clock(), "evaluator")
        retried = ctx.judge.retried(report.request_id)
        if retried is not None:
            return retried
        result = ctx.judge.judge(report, ctx.policies.latest_version, ctx.data.env_steps,
                                 ctx.lifecycle.wall_seconds(ctx.clock()), ctx.learner.iteration, ctx.fleet.alive)
        ctx.commit()  # the validation and any test request in one transaction
        return result

    def test(self, report: HoldoutReport) -> HoldoutResult:
        ctx = self.ctx
        ctx.fleet.worker(report.worker_id, ctx.clock(), "evaluator")
        retried = ctx.judge.retried_test(report.request_id)
        if retried is not None:
            return retried
        result = ctx.judge.test(report, ctx.data.env_steps, ctx.lifecycle.wall_seconds(ctx.clock()),
                                ctx.learner.iteration)
        if result.confirmed:
            ctx.lifecycle.end("solved", ctx.judge.verdict(result), ctx.clock())
        ctx.commit()  # the test and the run's end in one transaction; workers hear of the end once it is durable
        return result

    def history(self) -> list[EvaluationResult]:
        return list(self.ctx.judge.results)
