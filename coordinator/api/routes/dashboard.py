"""The data behind the live dashboard (`GET /`): one compact poll returning only what the page lacks."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import Field

from rlfleet.coordinator.api.apidoc import route_doc
from rlfleet.coordinator.api.deps import ReaderScope, RunDep
from rlfleet.coordinator.observe.timeline import COLUMNS, EVALUATION_COLUMNS
from rlfleet.shared.wire import Wire

router = APIRouter(prefix="/v1", tags=["run"])
Since = Annotated[int, Query(ge=0, le=2**53, examples=[0], description=(
    "the `seq` (or `evaluations_next`, `tests_next`) of the previous reply: only newer entries are returned"))]
Boot = Annotated[str | None, Query(max_length=64, examples=["9f3c2a1b"], description=(
    "the `boot` of the previous reply; another value (a restarted coordinator) returns everything from the start"))]


class DashboardUpdate(Wire):
    """Rows are arrays in the order of their `*columns` list, to keep a poll small."""

    boot: str = Field(description="server-issued id of this coordinator process; send it back as `boot`")
    seq: int = Field(description="send back as `since`: the next poll returns only newer rows")
    more: bool = Field(description="more rows wait beyond this reply's cap: poll again at once")
    columns: list[str] = Field(description="names of the entries of each row of `rows`")
    rows: list[list[Any]] = Field(description="one row per housekeeping tick (about a second), thinned when old")
    evaluation_columns: list[str] = Field(description="names of the entries of each evaluation and test row")
    evaluations: list[list[Any]] = Field(description="validations from `evaluations_since` on")
    evaluations_next: int = Field(description="send back as `evaluations_since`")
    tests: list[list[Any]] = Field(description="held-out tests from `tests_since` on (evaluation_columns)")
    tests_next: int = Field(description="send back as `tests_since`")
    solve_threshold: float | None = Field(description=(
        "the mean return that solves the run (the curves' reference line); null: the run has no threshold"))
    snapshot: dict[str, Any] | None = Field(description=(
        "the run's state at the last tick: status fields, buffers, policy lag, and workers as rows of "
        "`worker_columns`; null before the first tick"))


_EXAMPLE = DashboardUpdate(
    boot="9f3c2a1b", seq=42, more=False, columns=COLUMNS,
    rows=[[42, 41.9, 61440, 1480.5, 187.3, 8.02, 0.6144, 37, {"loss": 0.41, "q_mean": 21.7}]],
    evaluation_columns=EVALUATION_COLUMNS, evaluations=[[40.2, 59392, 35, 212.4, 31.0]], evaluations_next=12,
    tests=[], tests_next=0, solve_threshold=475.0,
    snapshot={"run_name": "cartpole__s0__20261124-101500", "run_state": "running", "env_steps": 61440,
              "policy_version": 37, "worker_columns": ["worker_id", "kind", "name"],
              "workers": [["learner-2-cb5ffa", "learner", "gpu0"]]})


@router.get("/dashboard", response_model=DashboardUpdate,
            summary="What the dashboard lacks: curve rows since `since`, new evaluations and tests, current state",
            **route_doc("read", (
                "The live dashboard's one poll (`GET /`): the curve rows recorded since `since` (one per housekeeping "
                "tick, thinned when old), validations and held-out tests past the counts it already has, and the "
                "run's current state with every worker. Rows are arrays in `columns` order, to keep a poll small; "
                "at most 1,000 of each come per reply (`more` says to poll again at once). The state is serialised "
                "once per tick however many pages poll."), ("invalid",), response=_EXAMPLE))
async def dashboard(request: Request, run: RunDep, _: ReaderScope, since: Since = 0, evaluations_since: Since = 0,
                    tests_since: Since = 0, boot: Boot = None) -> Response:
    body = request.app.state.timeline.update(since, boot, run.ctx.judge.results, evaluations_since, run.ctx.judge.tests,
                                             tests_since, run.ctx.config.env.threshold)
    return Response(content=body, media_type="application/json")
