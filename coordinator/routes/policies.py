"""Policy versions: the learner publishes immutable files; anyone may ask for the latest (ETag / 304)."""

from __future__ import annotations

from fastapi import APIRouter, Header, Response

from coordinator.deps import LearnerScope, ReaderScope, RunDep
from coordinator.errors import NotFound
from shared.wire import Ack, PolicyPublish, PolicyRef

router = APIRouter(prefix="/v1/policies", tags=["policies"])


@router.post("", response_model=Ack, summary="Publish a new policy version (strictly increasing)")
async def publish(body: PolicyPublish, run: RunDep, _: LearnerScope) -> Ack:
    return await run.publish(body)


@router.get("/latest", response_model=PolicyRef, summary="The latest policy; 304 if If-None-Match matches",
            responses={304: {"description": "unchanged since the ETag given"}, 404: {"description": "none yet"}})
async def latest(run: RunDep, _: ReaderScope, response: Response,
                 if_none_match: str | None = Header(None)) -> PolicyRef | Response:
    policy = run.policies.committed
    if policy is None:
        raise NotFound("no policy has been published yet")
    etag = f'"v{policy.version}"'
    if if_none_match == etag:
        return Response(status_code=304, headers={"ETag": etag})
    response.headers["ETag"] = etag
    return policy
