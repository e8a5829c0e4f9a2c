"""FastAPI dependency aliases used by the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from coordinator.api.auth import require
from coordinator.run import Run


async def _run(request: Request) -> Run:  # async: resolved on the loop, no threadpool hop
    return request.app.state.run


RunDep = Annotated[Run, Depends(_run)]
ReaderScope = Annotated[str, Depends(require(reads=True))]
AnyWorkerScope = Annotated[str, Depends(require("collector", "learner", "evaluator"))]
CollectorScope = Annotated[str, Depends(require("collector"))]
LearnerScope = Annotated[str, Depends(require("learner"))]
EvaluatorScope = Annotated[str, Depends(require("evaluator"))]
AdminScope = Annotated[str, Depends(require("admin"))]
