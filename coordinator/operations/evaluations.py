"""The evaluator's reports: validations (which may nominate a version for a held-out test) and held-out tests
(one that confirms ends the run, solved; in a run with no threshold, the end-of-budget test ends it)."""

from __future__ import annotations

from rlfleet.coordinator.operations.budget import tested
from rlfleet.coordinator.operations.context import RunContext
from rlfleet.shared.storage.layout import policy_path
from rlfleet.shared.wire import EvaluationReport, EvaluationResult, HoldoutReport, HoldoutResult


class Evaluations:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def evaluate(self, report: EvaluationReport) -> EvaluationResult:
        ctx = self.ctx
        ctx.fleet.worker(report.worker_id, ctx.clock(), "evaluator")
        retried = ctx.judge.retried(report.request_id)
        if retried is not None:
            return retried
        former = ctx.judge.best
        result = ctx.judge.judge(report, ctx.policies.latest_version, ctx.data.env_steps,
                                 ctx.lifecycle.wall_seconds(ctx.clock()), ctx.learner.iteration, ctx.fleet.alive)
        outlived = [] if former is None or ctx.judge.best is former else self._unkept(former.policy_version)
        ctx.commit(after=lambda: ctx.payloads.delete(outlived))  # the validation and any test request, at once
        return result

    def _unkept(self, version: int) -> list[str]:
        """The policy file of `version`, a former best validated version or a former end-of-budget candidate, once
        neither the book, the opponent pool, the best nor a pending end-of-budget test needs it any more (a
        validation under way when training stopped may replace the best whose test the run asked for; the
        evaluator, whose best/ then holds the new best, reads the asked version from the store). The book's
        retention spares the best's and the asked version's files (publishing.py), so `rlfleet test --version`
        and a run's end-of-budget test find them however many versions came since."""
        ctx = self.ctx
        if any(p.version == version for p in ctx.policies.versions) or ctx.opponents.holds(version):
            return []
        return [] if ctx.judge.keeps(version) else [policy_path(version)]

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
        asked = ctx.judge.final
        tested(ctx, result)  # a run with no threshold ends once its end-of-budget test reports
        # or asks for the test of a better best found meanwhile, which frees the file of the version just tested
        outlived = [] if asked is None or ctx.judge.final == asked else self._unkept(asked)
        # the test and the run's end in one transaction; workers hear of the end once it is durable
        ctx.commit(after=lambda: ctx.payloads.delete(outlived))
        return result

    def history(self) -> list[EvaluationResult]:
        return list(self.ctx.judge.results)
