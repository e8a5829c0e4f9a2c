"""Policy versions: the learner publishes immutable files; anyone may ask for the latest (ETag / 304)."""

from __future__ import annotations

from fastapi import APIRouter, Header, Response

from rlfleet.coordinator.api import examples as ex
from rlfleet.coordinator.api.apidoc import BODY, route_doc
from rlfleet.coordinator.api.deps import LearnerScope, ReaderScope, RunDep
from rlfleet.coordinator.errors import NotFound
from rlfleet.shared.wire import Ack, OpponentPool, PolicyPublish, PolicyRef

router = APIRouter(prefix="/v1/policies", tags=["policies"])


@router.post("", response_model=Ack, summary="Publish a new policy version (strictly increasing)",
             **route_doc("learner", "Publishes policy `version`, a file already written to the store at "
                         "`policies/v<version, 8 digits>.safetensors` (the policy JSON Schema, GET "
                         "/v1/schemas/policy). Versions strictly increase: republishing an older or equal version "
                         "is `conflict`. Waiting heartbeats are answered at once with the new policy.",
                         ("unknown_worker", "conflict", *BODY, "journal_unavailable"), ex.PUBLISH, ex.ACK))
async def publish(body: PolicyPublish, run: RunDep, _: LearnerScope) -> Ack:
    return await run.publishing.publish(body)


@router.get("/latest", response_model=PolicyRef, summary="The latest policy; 304 if If-None-Match matches",
            **route_doc("read", "The latest published policy (version, store path, sha256) with an `ETag`; send it "
                        "back as `If-None-Match` to get `304` while nothing newer exists. `not_found` until the "
                        "first publish.", ("not_found", "invalid"), response=ex.POLICY,
                        responses={304: {"description": "unchanged since the ETag given"}}))
async def latest(run: RunDep, _: ReaderScope, response: Response,
                 if_none_match: str | None = Header(None, description="the ETag of the policy the caller has")
                 ) -> PolicyRef | Response:
    policy = run.ctx.policies.committed
    if policy is None:
        raise NotFound("no policy has been published yet")
    etag = f'"v{policy.version}"'
    if if_none_match == etag:
        return Response(status_code=304, headers={"ETag": etag})
    response.headers["ETag"] = etag
    return policy


@router.get("/opponents", response_model=OpponentPool, summary="Self-play: the versions games are played against",
            **route_doc("read", "The opponent pool of a self-play run (`self_play` in the run config): the latest "
                        "durable version, the earlier versions kept as opponents (every `every_versions`-th, the "
                        "newest `pool_size`; their files stay in the store while they are in the pool) and how "
                        "often each kind of opponent is drawn. Collectors fetch it when a version joins the pool; "
                        "the evaluator before each validation. A pool version whose file is gone from the store "
                        "(deleted outside rlfleet) leaves the pool, logged as an error and counted in status "
                        "(`self_play.pool_missing`). `conflict` for a run without self-play.",
                        ("conflict", "store_unavailable"), response=ex.OPPONENTS))
async def opponents(run: RunDep, _: ReaderScope) -> OpponentPool:
    return await run.publishing.opponents_reply()
