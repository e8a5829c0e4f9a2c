"""The run as a whole: status, resolved config, and stopping it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from rlfleet.coordinator.api import examples as ex
from rlfleet.coordinator.api.apidoc import BODY, route_doc
from rlfleet.coordinator.api.deps import AdminScope, ReaderScope, RunDep
from rlfleet.shared.wire import RunResponse, Status, StopRequest

router = APIRouter(prefix="/v1", tags=["run"])


@router.get("/status", response_model=Status, summary="Workers, tasks, buffers, counters, learner, evaluations",
            **route_doc("read", "The run as the coordinator sees it now: counters (chunks, env steps, corrupt "
                        "chunks, env errors), workers and their leases, tasks, buffers, the learner's progress, "
                        "evaluations and tests. With `wait=S` a running run's reply is held for S seconds, or until "
                        "the run ends: a watcher polling this way learns of the end at once.", ("invalid",),
                        response=ex.STATUS))
async def status(request: Request, run: RunDep, _: ReaderScope, wait: Annotated[float, Query(
        ge=0, le=3600, examples=[0.5], description=(
            "seconds to hold the reply while the run is running (capped by the coordinator's "
            "RLFLEET_STATUS_WAIT_SECONDS, 5 by default); it comes at once when the run ends"))] = 0.0) -> Status:
    wait = min(wait, request.app.state.settings.status_wait_seconds)
    if wait:
        await run.ctx.wait_until(lambda: False, run.ctx.policy_signal, wait)  # returns when the run ends
    return run.status()


@router.get("/run", response_model=RunResponse, summary="The run's name, state and resolved config",
            **route_doc("read", "The run's name, state and its config with every default resolved.",
                        response=ex.RUN))
async def run_info(run: RunDep, _: ReaderScope) -> RunResponse:
    return RunResponse(run_name=run.ctx.config.name, run_state=run.ctx.lifecycle.state, config=run.ctx.config)


@router.post("/run/stop", response_model=Status, summary="End the run; every worker is told to exit",
             **route_doc("admin", "Ends the run (state `stopped`); every worker learns it from its next reply's "
                         "directive and exits. Stopping an ended run changes nothing.",
                         (*BODY, "journal_unavailable"), ex.STOP, ex.STATUS))
async def stop(body: StopRequest, run: RunDep, _: AdminScope) -> Status:
    run.controls.stop(body.reason)
    return await run.ctx.settled(run.status())
