"""Held-out tests: the evaluator runs the test a validation reply asked for; a confirmed test solves the run."""

from __future__ import annotations

from fastapi import APIRouter

from rlfleet.coordinator.api import examples as ex
from rlfleet.coordinator.api.apidoc import BODY, route_doc
from rlfleet.coordinator.api.deps import EvaluatorScope, ReaderScope, RunDep
from rlfleet.shared.wire import HoldoutReport, HoldoutResult

router = APIRouter(prefix="/v1/tests", tags=["evaluations"])


@router.post("", response_model=HoldoutResult, summary="Report the held-out test episodes of a candidate version",
             **route_doc("evaluator", "Reports the held-out test a validation reply asked for: "
                         "`evaluation.test_episodes` greedy episodes on test seeds. A confirming test solves the "
                         "run. `conflict`: no test of this version was requested. A retry with the same "
                         "`request_id` gets the first reply.",
                         ("unknown_worker", "conflict", *BODY, "journal_unavailable"), ex.HOLDOUT, ex.TESTED))
async def report(body: HoldoutReport, run: RunDep, _: EvaluatorScope) -> HoldoutResult:
    return await run.ctx.settled(run.evaluations.test(body))


@router.get("", response_model=list[HoldoutResult], summary="All held-out tests of this run, oldest first",
            **route_doc("read", "Every held-out test of this run, oldest first.", response=[ex.TESTED]))
async def history(run: RunDep, _: ReaderScope) -> list[HoldoutResult]:
    return list(run.ctx.judge.tests)
