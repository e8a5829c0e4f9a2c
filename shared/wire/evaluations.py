"""Wire models of validations and held-out tests (coordinator/state/judge.py decides what they mean)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from shared.wire.base import Count, Id, RequestId, Return, Wire
from shared.wire.battles import BattleRecord

Seed = Annotated[int, Field(ge=0, lt=2**96, description="base seed of the vector env (env i: seed + i; see "
                                                        "shared/envs/seeds.py)")]


class EvaluationReport(Wire):
    """A validation: `evaluation.episodes` greedy episodes of one policy version on validation seeds."""

    worker_id: Id
    """The worker's id, issued by the coordinator at registration."""
    request_id: RequestId | None = None
    """Client-generated id of this request, kept across retries: a retry gets the first reply and changes nothing."""
    policy_version: Annotated[int, Field(ge=1)]
    """The published version evaluated."""
    returns: Annotated[list[Return], Field(min_length=1, max_length=10_000)]
    """Undiscounted return of each episode."""
    lengths: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1, max_length=10_000)]
    """Length in steps of each episode, in the order of returns."""
    seed: Seed | None = None
    """Base seed of the validation envs."""
    battles: Annotated[list[BattleRecord], Field(max_length=64, description=(
        "two-player games: records against opponent pool versions (games against the baselines of "
        "evaluation.against are the returns themselves, `episodes` per baseline in the rule's order)"))] = []


class EvaluationResult(Wire):
    policy_version: int
    """The version evaluated."""
    mean: float
    """Mean return over the episodes."""
    std: float
    """Standard deviation of the returns."""
    episodes: int
    """Number of episodes."""
    env_steps: Count = Field(description="run env steps when the evaluation was reported")
    wall_seconds: float
    """Run wall-clock seconds when reported."""
    iteration: Count = Field(0, description="learner updates when the evaluation was reported")
    seed: Seed | None = None
    """Base seed of the validation envs."""
    solved: bool = Field(description="the validation reached the threshold (the run is solved only once a "
                                     "held-out test confirms it)")
    test_requested: bool = Field(False, description="the evaluator is to run the held-out test of this version "
                                                    "now (at most one test is in flight)")
    battles: list[BattleRecord] = Field([], description="two-player games: won / drawn / lost per opponent")
    elo: float | None = Field(None, description=(
        "two-player games: the version's Elo rating from every validation's games so far (random = 0)"))


class HoldoutReport(Wire):
    """A held-out test: `evaluation.test_episodes` greedy episodes of the requested version on test seeds."""

    worker_id: Id
    """The worker's id, issued by the coordinator at registration."""
    request_id: RequestId | None = None
    """Client-generated id of this request, kept across retries: a retry gets the first reply and changes nothing."""
    policy_version: Annotated[int, Field(ge=1)]
    """The version whose test was requested."""
    returns: Annotated[list[Return], Field(min_length=1, max_length=100_000)]
    """Undiscounted return of each episode."""
    lengths: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1, max_length=100_000)]
    """Length in steps of each episode, in the order of returns."""
    seed: Seed | None = None
    """Base seed of the test envs."""


class HoldoutResult(Wire):
    policy_version: int
    """The version tested."""
    mean: float
    """Mean return over the episodes."""
    std: float
    """Standard deviation of the returns."""
    ci95: tuple[float, float] = Field(description="95% confidence interval of the mean (normal approximation)")
    episodes: int
    """Number of episodes."""
    validation_mean: float = Field(description="the validation that made this version a candidate")
    env_steps: Count
    """Run env steps when the test was reported."""
    wall_seconds: float
    """Run wall-clock seconds when reported."""
    iteration: Count = 0
    """Learner updates when the test was reported."""
    seed: Seed | None = None
    """Base seed of the test envs."""
    confirmed: bool = Field(description="the test's mean reached the threshold (two-player games: it met every "
                                        "bar of evaluation.against): the run is solved")
    battles: list[BattleRecord] = Field([], description="two-player games: won / drawn / lost per baseline")
