"""Evaluation results: the evaluator reports greedy episodes; the coordinator decides 'solved'."""

from __future__ import annotations

from fastapi import APIRouter

from coordinator.deps import EvaluatorScope, ReaderScope, RunDep
from shared.wire import EvaluationReport, EvaluationResult

router = APIRouter(prefix="/v1/evaluations", tags=["evaluations"])


@router.post("", response_model=EvaluationResult, summary="Report the episodes of one policy version")
async def report(body: EvaluationReport, run: RunDep, _: EvaluatorScope) -> EvaluationResult:
    return await run.settled(run.evaluate(body))


@router.get("", response_model=list[EvaluationResult], summary="All evaluations of this run, oldest first")
async def history(run: RunDep, _: ReaderScope) -> list[EvaluationResult]:
    return run.evaluation_history()
