"""Generations of a population-based learner (evolution strategies): open, claim a member, report, close.

Not chunk reports: a member's result is a few numbers with no payload file, taken through its own small
endpoint, and members are leased per generation, apart from the collectors' long-lived tasks.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path

from rlfleet.coordinator.api import examples as ex
from rlfleet.coordinator.api.apidoc import BODY, route_doc
from rlfleet.coordinator.api.deps import CollectorScope, LearnerScope, loop_operations
from rlfleet.coordinator.operations.generations import Population
from rlfleet.shared.wire import (
    GenerationClose,
    GenerationOpen,
    GenerationOpened,
    GenerationResults,
    MemberClaim,
    MemberClaimRequest,
    MemberResult,
    ResultAck,
)

router = APIRouter(prefix="/v1/generations", tags=["generations"])
GenerationNumber = Annotated[int, Path(ge=1, le=2**53, examples=[7], description=(
    "generation number, issued by the coordinator (GenerationOpened.generation, MemberTask.generation)"))]
_NOT_POPULATION = "`conflict` also when the run's algorithm does not train from generations."


def _population(what: str) -> Any:
    """The run's population operations; a 409 naming `what` in a run of another loop kind."""
    return Depends(loop_operations(Population, f"cannot {what}: this run's algorithm ({{algorithm}}) trains from "
                                   "chunks, not from generations of perturbed policies"))


@router.post("", response_model=GenerationOpened, summary="Open the next generation of perturbed policies",
             **route_doc("learner", "Opens the next generation: `members` (noise offset, antithetic sign) perturb the "
                         "latest published policy (`policy_version`) as `perturbation` says. The coordinator issues "
                         "the generation number. Keep `request_id` across retries: a retry gets the same generation. "
                         "A generation left open (the learner restarted) is closed as it stands. "
                         + _NOT_POPULATION, ("unknown_worker", "conflict", *BODY, "journal_unavailable"),
                         ex.GENERATION_OPEN, ex.GENERATION_OPENED))
async def open_generation(body: GenerationOpen, scope: LearnerScope,
                          population: Annotated[Population, _population("open a generation")]) -> GenerationOpened:
    return await population.open_generation(body, scope)


@router.post("/claim", response_model=MemberClaim, summary="Claim a member to evaluate (long poll)",
             **route_doc("collector", "Claims the next member of the open generation under a lease of "
                         "`perturbation.lease_seconds`: report it before then, or it is offered to another "
                         "collector. With `wait_seconds` the reply waits (capped at half a lease) until a member is "
                         "available; `member` is null if none came. Evaluate it greedily on `seed`, `seed + 1`, ... "
                         "(one episode per env) with theta + sign * sigma * table[noise_index : noise_index + dim]. "
                         + _NOT_POPULATION, ("unknown_worker", "conflict", *BODY), ex.MEMBER_CLAIM,
                         ex.MEMBER_CLAIMED))
async def claim_member(body: MemberClaimRequest, scope: CollectorScope,
                       population: Annotated[Population, _population("claim a member")]) -> MemberClaim:
    return await population.claim_member(body, scope)


@router.post("/{generation}/results", response_model=ResultAck, summary="Report a member's result",
             **route_doc("collector", "Reports member `member` of `generation`: its mean return, mean length, "
                         "episodes and env steps (which count in the run's env steps). Idempotent: the same member "
                         "reported again is acknowledged as a `duplicate` and changes nothing. A result for the last "
                         "closed generation is acknowledged as `late` (counted once) and never applied. Only the "
                         "member's claimant may report it: from another worker (the member was never claimed by it, "
                         "or its lease ran out and another worker claimed it), and for a generation closed before "
                         "the last (nothing is left to tell a retry by), the result is `member_not_held`: drop it "
                         "and claim a new member. A generation not issued yet, or a member it does not have, is "
                         "`invalid`. " + _NOT_POPULATION,
                         ("unknown_worker", "conflict", "member_not_held", *BODY, "journal_unavailable"),
                         ex.MEMBER_RESULT,
                         ex.MEMBER_ACK))
async def report_member(generation: GenerationNumber, body: MemberResult, scope: CollectorScope,
                        population: Annotated[Population, _population("report a member")]) -> ResultAck:
    return await population.report_member(generation, body, scope)


@router.post("/{generation}/close", response_model=GenerationResults,
             summary="Close a generation once enough members reported (long poll)",
             **route_doc("learner", "Waits up to `wait_seconds` (capped at half a lease) until `min_fraction` of the "
                         "members have reported, then closes the generation and returns every result; `closed` is "
                         "false (no results) if the fraction was not reached: ask again, or send `force` to close "
                         "with what arrived. Results reported after the close are late. Closing the last closed "
                         "generation again returns the same results; an older one is `not_found`, a number not "
                         "issued yet `invalid`. " + _NOT_POPULATION,
                         ("unknown_worker", "not_found", "conflict", *BODY, "journal_unavailable"),
                         ex.GENERATION_CLOSE, ex.GENERATION_RESULTS))
async def close_generation(generation: GenerationNumber, body: GenerationClose, scope: LearnerScope,
                           population: Annotated[Population, _population("close a generation")],
                           ) -> GenerationResults:
    return await population.close_generation(generation, body, scope)
