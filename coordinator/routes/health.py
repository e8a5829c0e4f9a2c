"""Liveness, readiness and Prometheus metrics (no auth: they reveal counters only, never tokens or data).

All three are answered on the event loop from counters the components keep, so they never wait behind a
commit, a long poll or a status document of a thousand workers. The metrics are the app's own registry
(coordinator/telemetry.py).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4

from coordinator.deps import RunDep

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The run is loaded and accepting workers")
async def readyz(run: RunDep) -> dict[str, str]:
    return {"status": "ready", "run_state": run.lifecycle.state}


@router.get("/metrics", summary="Prometheus text exposition of the run's counters", response_class=PlainTextResponse)
async def metrics(run: RunDep, request: Request) -> PlainTextResponse:
    # Every name fits the classic text format, which every Prometheus version scrapes.
    return PlainTextResponse(request.app.state.telemetry.exposition(), media_type=CONTENT_TYPE_PLAIN_0_0_4)
