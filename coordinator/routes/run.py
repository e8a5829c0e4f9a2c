"""The run as a whole: status, resolved config, and stopping it."""

from __future__ import annotations

from fastapi import APIRouter

from coordinator.deps import AdminScope, ReaderScope, RunDep
from shared.wire import RunResponse, Status, StopRequest

router = APIRouter(prefix="/v1", tags=["run"])


@router.get("/status", response_model=Status, summary="Workers, tasks, buffers, counters, learner, evaluations")
async def status(run: RunDep, _: ReaderScope) -> Status:
    return run.status()


@router.get("/run", response_model=RunResponse, summary="The run's name, state and resolved config")
async def run_info(run: RunDep, _: ReaderScope) -> RunResponse:
    return RunResponse(run_name=run.config.name, run_state=run.lifecycle.state, config=run.config)


@router.post("/run/stop", response_model=Status, summary="End the run; every worker is told to exit")
async def stop(body: StopRequest, run: RunDep, _: AdminScope) -> Status:
    return await run.settled(run.stop(body.reason))
