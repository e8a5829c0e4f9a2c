"""Worker registration, lease heartbeats and task claims."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from rlfleet.coordinator.api import examples as ex
from rlfleet.coordinator.api.apidoc import BODY, route_doc
from rlfleet.coordinator.api.deps import AnyWorkerScope, RunDep
from rlfleet.coordinator.errors import Forbidden
from rlfleet.shared.wire import ClaimResponse, HeartbeatResponse, RegisterRequest, RegisterResponse

router = APIRouter(prefix="/v1/workers", tags=["workers"])

# OpenAPI links: a client (or a stateful fuzzer) learns that the registration's worker_id feeds these paths.
_WORKER_LINKS = {
    "Heartbeat": {"operationId": "heartbeat", "parameters": {"worker_id": "$response.body#/worker_id"}},
    "Claim": {"operationId": "claim", "parameters": {"worker_id": "$response.body#/worker_id"}},
}
WorkerId = Annotated[str, Path(description="issued by the coordinator at registration (RegisterResponse.worker_id)",
                               examples=["collector-1-a1b2c3"])]


@router.post("", response_model=RegisterResponse, summary="Register a worker and receive a lease",
             operation_id="register", **route_doc(
                 "worker",
                 "Registers a worker of `kind` and starts its lease. The coordinator issues the `worker_id` that "
                 "every later call names. Send a fresh `request_id` per registration and keep it across retries: "
                 "a retry gets the same worker instead of a second one. A worker token may register only its own "
                 "kind. Renew the lease with heartbeats every `heartbeat_seconds`; a worker silent for "
                 "`lease_seconds` loses its task.",
                 (*BODY, "too_many_workers", "journal_unavailable"),
                 ex.REGISTER, ex.REGISTERED, {200: {"links": _WORKER_LINKS}}))
async def register(body: RegisterRequest, run: RunDep, scope: AnyWorkerScope) -> RegisterResponse:
    if scope not in ("admin", body.kind):
        raise Forbidden(f"a {scope!r} token cannot register a {body.kind}")
    return await run.ctx.settled(run.workers.register(body.kind, body.name, body.restarts, body.request_id,
                                                   body.last_error))


@router.post("/{worker_id}/heartbeat", response_model=HeartbeatResponse,
             summary="Renew the lease; optionally wait (long poll) for a newer policy or for a pause to end",
             operation_id="heartbeat", **route_doc(
                 "worker",
                 "Renews the worker's lease and returns the current directive (run state, pause, latest policy). "
                 "With `newer_than=V` the reply is held until a policy newer than V is published, or for `wait` "
                 "seconds at most (capped at the registration's `max_wait_seconds`; `newer_than` without `wait` "
                 "answers at once): a collector long-polls here to switch policies within a round trip. With "
                 "`while_paused=true` a collector's reply is held while its directive says pause (the operator's "
                 "pause or the rate limiter), for `wait` seconds at most: a paused collector waits its pause out "
                 "here and hears of the resume at once (one of `newer_than` and `while_paused` per request). "
                 "Either way the run's end answers at once. No body. "
                 "`unknown_worker` means the lease expired: register again and claim afresh.",
                 ("unknown_worker", *BODY), response=ex.HEARTBEAT))
async def heartbeat(
    worker_id: WorkerId, run: RunDep, scope: AnyWorkerScope,
    newer_than: Annotated[int | None, Query(ge=0, le=2**53, examples=[3], description=(
        "reply once a policy newer than this version exists"))] = None,
    wait: Annotated[float, Query(ge=0, le=3600, examples=[5.0], description=(
        "longest wait in seconds for `newer_than` or `while_paused`; capped at the registration's "
        "max_wait_seconds"))] = 0.0,
    while_paused: Annotated[bool, Query(examples=[True], description=(
        "hold a collector's reply while collection is paused (not with `newer_than`)"))] = False,
) -> Response:
    body = await run.workers.heartbeat_reply(worker_id, scope, newer_than, wait, while_paused)
    return Response(content=body, media_type="application/json")


@router.post("/{worker_id}/claim", response_model=ClaimResponse, summary="Claim (or re-read) this worker's task",
             operation_id="claim", **route_doc(
                 "worker",
                 "Gives the worker a task of its kind (the coordinator issues `task_id`), or the task it already "
                 "holds: calling again is safe. `task` is null while none is free (poll again after a short "
                 "wait) or once the run has ended. A collector task carries the env, its spaces, how to act "
                 "(`behaviour`), the chunk layout (`collector.num_envs`, `collector.chunk_steps`), a seed and the "
                 "latest policy. A learner group has one learner task per rank (`learner.replicas`); a learner "
                 "claiming while every rank is held gets `group_full`. No body.",
                 ("unknown_worker", "group_full", *BODY, "journal_unavailable"), response=ex.CLAIMED))
async def claim(worker_id: WorkerId, run: RunDep, scope: AnyWorkerScope) -> ClaimResponse:
    return await run.ctx.settled(run.workers.claim(worker_id, scope))
