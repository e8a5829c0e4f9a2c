"""The data behind the live dashboard (`GET /`): one compact poll returning only what the page lacks."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import Field

from coordinator.deps import ReaderScope, RunDep
from shared.wire_base import Wire

router = APIRouter(prefix="/v1", tags=["run"])
Since = Annotated[int, Query(ge=0, le=2**53)]


class DashboardUpdate(Wire):
    """Rows are arrays in the order of their `*columns` list, to keep a poll small."""

    boot: str = Field(description="server-issued id of this coordinator process; send it back as `boot`")
    seq: int = Field(description="send back as `since`: the next poll returns only newer rows")
    more: bool = Field(description="more rows wait beyond this reply's cap: poll again at once")
    columns: list[str]
    rows: list[list[Any]] = Field(description="one row per housekeeping tick (about a second), thinned when old")
    evaluation_columns: list[str]
    evaluations: list[list[Any]] = Field(description="validations from `evaluations_since` on")
    evaluations_next: int = Field(description="send back as `evaluations_since`")
    tests: list[list[Any]] = Field(description="held-out tests from `tests_since` on (evaluation_columns)")
    tests_next: int = Field(description="send back as `tests_since`")
    solve_threshold: float
    snapshot: dict[str, Any] | None = Field(description=(
        "the run's state at the last tick: status fields, buffers, policy lag, and workers as rows of "
        "`worker_columns`; null before the first tick"))


@router.get("/dashboard", response_model=DashboardUpdate,
            summary="What the dashboard lacks: curve rows since `since`, new evaluations and tests, current state")
async def dashboard(request: Request, run: RunDep, _: ReaderScope, since: Since = 0, evaluations_since: Since = 0,
                    tests_since: Since = 0, boot: Annotated[str | None, Query(max_length=64)] = None) -> Response:
    body = request.app.state.timeline.update(since, boot, run.judge.results, evaluations_since, run.judge.tests,
                                             tests_since, run.config.env.solve_threshold)
    return Response(content=body, media_type="application/json")
