"""Liveness, readiness and Prometheus metrics (no auth: they reveal counters only, never tokens or data).

All three are answered on the event loop from counters the components keep, so they never wait behind a
commit, a long poll or a status document of a thousand workers. The metrics are the app's own registry
(coordinator/telemetry.py).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4

from rlfleet.coordinator.api.apidoc import route_doc
from rlfleet.coordinator.api.deps import RunDep

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is up",
            **route_doc(None, "Liveness: answers as soon as the process serves HTTP.", response={"status": "ok"}))
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The run is loaded and accepting workers",
            **route_doc(None, "Readiness: the run is loaded (answers once the journal is replayed).",
                        response={"status": "ready", "run_state": "running"}))
async def readyz(run: RunDep) -> dict[str, str]:
    return {"status": "ready", "run_state": run.ctx.lifecycle.state}


_METRICS_EXAMPLE = """# HELP rlfleet_env_steps_total env steps acknowledged
# TYPE rlfleet_env_steps_total counter
rlfleet_env_steps_total 61440.0
# HELP rlfleet_policy_version latest published policy version
# TYPE rlfleet_policy_version gauge
rlfleet_policy_version 37.0
"""


@router.get("/metrics", summary="Prometheus text exposition of the run's counters", response_class=PlainTextResponse,
            **route_doc(None, (
                "Prometheus text format (0.0.4) with HELP and TYPE: the run's counters and gauges, read when scraped, "
                "and histograms of request latency per route template (long polls and the fast path included), "
                "chunk sizes, sample waits, policy propagation and policy lag at ingest. Counters only: no tokens, "
                "no data."), responses={200: {"content": {"text/plain": {"example": _METRICS_EXAMPLE}}}}))
async def metrics(run: RunDep, request: Request) -> PlainTextResponse:
    # Every name fits the classic text format, which every Prometheus version scrapes.
    return PlainTextResponse(request.app.state.telemetry.exposition(), media_type=CONTENT_TYPE_PLAIN_0_0_4)
