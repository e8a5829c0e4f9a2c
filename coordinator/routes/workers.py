"""Worker registration, lease heartbeats and task claims."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from coordinator.deps import AnyWorkerScope, RunDep
from coordinator.errors import Forbidden
from shared.wire import ClaimResponse, HeartbeatResponse, RegisterRequest, RegisterResponse

router = APIRouter(prefix="/v1/workers", tags=["workers"])

# OpenAPI links: a client (or a stateful fuzzer) learns that the registration's worker_id feeds these paths.
_WORKER_LINKS = {
    "Heartbeat": {"operationId": "heartbeat", "parameters": {"worker_id": "$response.body#/worker_id"}},
    "Claim": {"operationId": "claim", "parameters": {"worker_id": "$response.body#/worker_id"}},
}


@router.post("", response_model=RegisterResponse, summary="Register a worker and receive a lease",
             operation_id="register", responses={200: {"description": "registered", "links": _WORKER_LINKS}})
async def register(body: RegisterRequest, run: RunDep, scope: AnyWorkerScope) -> RegisterResponse:
    if scope not in ("admin", body.kind):
        raise Forbidden(f"a {scope!r} token cannot register a {body.kind}")
    return await run.settled(run.register(body.kind, body.name, body.restarts, body.request_id,
                                                   body.last_error))


@router.post("/{worker_id}/heartbeat", response_model=HeartbeatResponse,
             summary="Renew the lease; optionally wait (long poll) for a policy newer than a version",
             operation_id="heartbeat")
async def heartbeat(
    worker_id: str, run: RunDep, scope: AnyWorkerScope,
    newer_than: Annotated[int | None, Query(ge=0, le=2**53, description="reply once a newer policy exists")] = None,
    wait: Annotated[float, Query(ge=0, le=3600, description=(
        "longest wait in seconds for `newer_than`; capped at the registration's max_wait_seconds"))] = 0.0,
) -> Response:
    body = await run.heartbeat_reply(worker_id, scope, newer_than, wait)
    return Response(content=body, media_type="application/json")


@router.post("/{worker_id}/claim", response_model=ClaimResponse, summary="Claim (or re-read) this worker's task",
             operation_id="claim")
async def claim(worker_id: str, run: RunDep, scope: AnyWorkerScope) -> ClaimResponse:
    return await run.settled(run.claim(worker_id, scope))
