"""Wire models of validations and held-out tests (coordinator/state/judge.py decides what they mean)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from rlfleet.shared.wire.base import Count, Id, RequestId, Return, Wire
from rlfleet.shared.wire.battles import BattleRecord

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


SolveRule = Literal["retest_lower_bound_95", "mean_at_threshold", "against"]
"""How a held-out test decided: `retest_lower_bound_95` (shared/solve_rule.py), `mean_at_threshold` (the rule before
it: results journalled by earlier versions of rlfleet) or `against` (the battle rule of two-player games)."""


class HoldoutResult(Wire):
    policy_version: int
    """The version tested."""
    mean: float
    """Mean return over the episodes."""
    std: float
    """Sample standard deviation of the returns (ddof=1; results from before the t intervals: ddof=0)."""
    ci95: tuple[float, float] = Field(description=(
        "two-sided 95% Student's t interval of the mean (results from before: the normal approximation)"))
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
    confirmed: bool = Field(description="the test met the run's solve rule (`rule`): the run is solved")
    rule: SolveRule = Field("mean_at_threshold", description=(
        "the rule that decided `confirmed`; results journalled before rlfleet recorded it read as "
        "`mean_at_threshold`, or `against` when they carry battles"))
    bound: float | None = Field(None, description=(
        "rule `retest_lower_bound_95`: the one-sided 95% lower prediction bound of the mean of an independent "
        "re-test of as many episodes, mean - t(0.95, n-1)·std·sqrt(2/n), that had to reach the threshold"))
    battles: list[BattleRecord] = Field([], description="two-player games: won / drawn / lost per baseline")

    @model_validator(mode="before")
    @classmethod
    def _rule_of_old_results(cls, data: Any) -> Any:
        """A result journalled before `rule` existed decided by the battle rule if it has battles."""
        if isinstance(data, dict) and "rule" not in data and data.get("battles"):
            return {**data, "rule": "against"}
        return data
