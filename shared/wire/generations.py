"""Wire models of population evaluation: generations of perturbed policies, their members and results.

A population-based learner (evolution strategies) opens a generation: a published policy version, how to
perturb it (a shared noise table, shared/policy/noise_table.py) and its members (noise offset, sign). Collectors
claim members under a lease, evaluate the perturbed policy and report a small result, no payload file. The
learner closes the generation once enough results are in (coordinator/state/generations.py owns the rules).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from rlfleet.shared.wire.base import Count, Directive, FlatIndex, Id, PolicyRef, RequestId, Return, Wire

Generation = Annotated[int, Field(ge=1, le=2**53, description="generation number, issued by the coordinator from 1")]
MemberIndex = Annotated[int, Field(ge=0, lt=10_000, description="the member's position in its generation")]
Fraction = Annotated[float, Field(gt=0, le=1)]


class Perturbation(Wire):
    """How every member of a generation is evaluated: theta + sign * sigma * table[index : index + dim]."""

    noise_seed: Annotated[int, Field(ge=0, lt=2**63, description="seed of the shared noise table")]
    noise_size: Annotated[int, Field(ge=1024, le=2**28, description="float32 entries of the shared noise table")]
    sigma: Annotated[float, Field(gt=0, le=10, description="perturbation scale")]
    episodes: Annotated[int, Field(ge=1, le=256, description="greedy episodes per member, one per env")]
    max_steps: Annotated[int | None, Field(ge=1, le=10_000_000, description=(
        "cap on the env steps of one member's episodes together; null: play them to their end"))] = None
    lease_seconds: Annotated[float, Field(gt=0, le=3600, description=(
        "a claimed member not reported within this is offered to another collector"))] = 30.0


class MemberSpec(Wire):
    noise_index: FlatIndex
    """Offset of the member's perturbation in the noise table."""
    sign: Literal[-1, 1] = Field(description="antithetic sign of the perturbation")


class GenerationOpen(Wire):
    worker_id: Id
    """The learner's id, issued by the coordinator at registration."""
    request_id: RequestId
    policy_version: Annotated[int, Field(ge=1, description="the published version the members perturb (the latest)")]
    perturbation: Perturbation
    """How collectors evaluate the members."""
    members: Annotated[list[MemberSpec], Field(min_length=1, max_length=10_000)]
    """The population, in member order."""


class GenerationOpened(Wire):
    generation: Generation
    population: Count = Field(description="members in the generation")
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""


class MemberClaimRequest(Wire):
    worker_id: Id
    """The collector's id, issued by the coordinator at registration."""
    wait_seconds: Annotated[float, Field(ge=0, le=600, description=(
        "long poll: wait up to this long (capped at half a lease) for a member to become available"))] = 0.0


class MemberTask(Wire):
    """One member to evaluate: its policy, perturbation and env seeds."""

    generation: Generation
    member: MemberIndex
    policy: PolicyRef
    """The policy version the generation perturbs."""
    perturbation: Perturbation
    """The generation's perturbation settings."""
    noise_index: FlatIndex
    """Offset of this member's perturbation in the noise table."""
    sign: Literal[-1, 1] = Field(description="antithetic sign of the perturbation")
    seed: Annotated[int, Field(ge=0, lt=2**96, description=(
        "base seed of the member's envs (episode i: seed + i; shared/envs/seeds.py); one block per generation"))]


class MemberClaim(Wire):
    member: MemberTask | None = Field(description="null when no member is waiting to be evaluated")
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""


class MemberResult(Wire):
    worker_id: Id
    """The collector's id, issued by the coordinator at registration."""
    member: MemberIndex
    mean_return: Return
    """Mean undiscounted return of the member's episodes."""
    mean_length: Annotated[float, Field(ge=0, le=1e9, description="mean length of the member's episodes")]
    episodes: Annotated[int, Field(ge=0, le=256, description="episodes finished (fewer when max_steps cut them)")]
    env_steps: Annotated[int, Field(ge=1, le=10_000_000, description="env steps the evaluation took")]


class ResultAck(Wire):
    accepted: bool = Field(description="the result counts for its generation")
    duplicate: bool = Field(description="the member was reported before; this report changed nothing")
    late: bool = Field(description="the generation had closed: acknowledged and counted as late, never applied")
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""


class GenerationClose(Wire):
    worker_id: Id
    """The learner's id, issued by the coordinator at registration."""
    min_fraction: Fraction = Field(description="close once this fraction of the members has reported")
    wait_seconds: Annotated[float, Field(ge=0, le=600, description=(
        "long poll: wait up to this long (capped at half a lease) for min_fraction"))] = 0.0
    force: bool = Field(False, description="close now with whatever has been reported (the learner's timeout)")


class MemberOutcome(Wire):
    member: MemberIndex
    noise_index: FlatIndex
    """Offset of the member's perturbation in the noise table."""
    sign: Literal[-1, 1] = Field(description="antithetic sign of the perturbation")
    mean_return: Return
    """Mean undiscounted return of the member's episodes."""
    mean_length: float = Field(description="mean length of the member's episodes")


class GenerationResults(Wire):
    generation: Generation
    closed: bool = Field(description="false: min_fraction was not reached within the wait; ask again")
    population: Count = Field(description="members in the generation")
    received: Count = Field(description="members reported so far")
    results: list[MemberOutcome] = Field(description="every reported member's result once closed; empty otherwise")
    late_results: Count = Field(description="results the run has received for closed generations so far")
    directive: Directive
    """What the worker is to do now: run state, pause, latest policy, run env steps."""


class PopulationStatus(Wire):
    generation: Count = Field(description="the open generation, or the last closed one (0: none yet)")
    open: bool = Field(description="whether that generation is open")
    population: Count = Field(description="its members")
    received: Count = Field(description="its members reported")
    claimed: Count = Field(description="its members claimed and not yet reported")
    generations_closed: Count = Field(description="generations closed so far")
    results_accepted: Count = Field(description="member results applied to their generation")
    late_results: Count = Field(description="results for closed generations: acknowledged, never applied")
    duplicate_results: Count = Field(description="repeated reports of a member, recognised and not counted again")
    members_reoffered: Count = Field(description="members whose lease ran out and were offered again")
    last_fraction: float = Field(description="fraction of the population the last closed generation received")
