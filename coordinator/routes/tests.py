"""Held-out tests: the evaluator runs the test a validation reply asked for; a confirmed test solves the run."""

from __future__ import annotations

from fastapi import APIRouter

from coordinator.deps import EvaluatorScope, ReaderScope, RunDep
from shared.wire import HoldoutReport, HoldoutResult

router = APIRouter(prefix="/v1/tests", tags=["evaluations"])


@router.post("", response_model=HoldoutResult, summary="Report the held-out test episodes of a candidate version")
async def report(body: HoldoutReport, run: RunDep, _: EvaluatorScope) -> HoldoutResult:
    return await run.settled(run.test(body))


@router.get("", response_model=list[HoldoutResult], summary="All held-out tests of this run, oldest first")
async def history(run: RunDep, _: ReaderScope) -> list[HoldoutResult]:
    return list(run.judge.tests)
