"""FastAPI dependency aliases used by the routers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

from fastapi import Depends, Request

from rlfleet.coordinator.api.auth import require
from rlfleet.coordinator.errors import Conflict
from rlfleet.coordinator.run import Run

T = TypeVar("T")


async def _run(request: Request) -> Run:  # async: resolved on the loop, no threadpool hop
    return request.app.state.run


RunDep = Annotated[Run, Depends(_run)]
ReaderScope = Annotated[str, Depends(require(reads=True))]
AnyWorkerScope = Annotated[str, Depends(require("collector", "learner", "evaluator"))]
CollectorScope = Annotated[str, Depends(require("collector"))]
LearnerScope = Annotated[str, Depends(require("learner"))]
EvaluatorScope = Annotated[str, Depends(require("evaluator"))]
AdminScope = Annotated[str, Depends(require("admin"))]


def loop_operations(operations: type[T], refusal: str) -> Callable[[Request], Awaitable[T]]:
    """The dependency through which a loop kind's routes reach its operations (`Run.workload.operations`).

    The routes of every registered loop kind are mounted in every run, so the REST contract does not depend on the
    run; in a run whose loop kind does not provide `operations`, this refuses with a 409 `conflict` whose message is
    `refusal` with `{algorithm}` filled in. Declare it after the route's scope, so authentication is checked first.
    """

    async def provided(request: Request) -> T:
        run: Run = request.app.state.run
        found = run.workload.operations
        if not isinstance(found, operations):
            raise Conflict(refusal.format(algorithm=run.ctx.plan.spec.name))
        return found

    return provided
