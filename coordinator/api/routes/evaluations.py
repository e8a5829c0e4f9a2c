"""Evaluation results: the evaluator reports greedy episodes; the coordinator decides 'solved'."""

from __future__ import annotations

from fastapi import APIRouter

from rlfleet.coordinator.api import examples as ex
from rlfleet.coordinator.api.apidoc import BODY, route_doc
from rlfleet.coordinator.api.deps import EvaluatorScope, ReaderScope, RunDep
from rlfleet.shared.wire import EvaluationReport, EvaluationResult

router = APIRouter(prefix="/v1/evaluations", tags=["evaluations"])


@router.post("", response_model=EvaluationResult, summary="Report the episodes of one policy version",
             **route_doc("evaluator", "Reports a validation: `evaluation.episodes` greedy episodes of a published "
                         "version on validation seeds. The reply says whether it reached the threshold and whether "
                         "to run the held-out test of this version now (`test_requested`). A retry with the same "
                         "`request_id` gets the first reply.",
                         ("unknown_worker", *BODY, "journal_unavailable"), ex.EVALUATION, ex.EVALUATED))
async def report(body: EvaluationReport, run: RunDep, _: EvaluatorScope) -> EvaluationResult:
    return await run.ctx.settled(run.evaluations.evaluate(body))


@router.get("", response_model=list[EvaluationResult], summary="All evaluations of this run, oldest first",
            **route_doc("read", "Every validation of this run, oldest first.", response=[ex.EVALUATED]))
async def history(run: RunDep, _: ReaderScope) -> list[EvaluationResult]:
    return run.evaluations.history()
