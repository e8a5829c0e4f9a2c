"""Wire models of validations and held-out tests (coordinator/judge.py decides what they mean)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from shared.wire_base import Count, Id, RequestId, Return, Wire

Seed = Annotated[int, Field(ge=0, lt=2**96, description="base seed of the vector env (env i: seed + i; see "
                                                        "shared/seeds.py)")]


class EvaluationReport(Wire):
    """A validation: `evaluation.episodes` greedy episodes of one policy version on validation seeds."""

    worker_id: Id
    request_id: RequestId | None = None
    policy_version: Annotated[int, Field(ge=1)]
    returns: Annotated[list[Return], Field(min_length=1, max_length=10_000)]
    lengths: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1, max_length=10_000)]
    seed: Seed | None = None


class EvaluationResult(Wire):
    policy_version: int
    mean: float
    std: float
    episodes: int
    env_steps: Count = Field(description="run env steps when the evaluation was reported")
    wall_seconds: float
    iteration: Count = Field(0, description="learner updates when the evaluation was reported")
    seed: Seed | None = None
    solved: bool = Field(description="the validation reached the threshold (the run is solved only once a "
                                     "held-out test confirms it)")
    test_requested: bool = Field(False, description="the evaluator is to run the held-out test of this version "
                                                    "now (at most one test is in flight)")


class HoldoutReport(Wire):
    """A held-out test: `evaluation.test_episodes` greedy episodes of the requested version on test seeds."""

    worker_id: Id
    request_id: RequestId | None = None
    policy_version: Annotated[int, Field(ge=1)]
    returns: Annotated[list[Return], Field(min_length=1, max_length=100_000)]
    lengths: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1, max_length=100_000)]
    seed: Seed | None = None


class HoldoutResult(Wire):
    policy_version: int
    mean: float
    std: float
    ci95: tuple[float, float] = Field(description="95% confidence interval of the mean (normal approximation)")
    episodes: int
    validation_mean: float = Field(description="the validation that made this version a candidate")
    env_steps: Count
    wall_seconds: float
    iteration: Count = 0
    seed: Seed | None = None
    confirmed: bool = Field(description="the test's mean reached the threshold: the run is solved")
