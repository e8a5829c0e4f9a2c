"""The run configuration: one validated model, loaded from YAML by the coordinator and handed to workers.

Workers never read the YAML themselves; they receive the parts they need inside their task, so a run is
described in exactly one place and a scaled-out collector cannot disagree with the coordinator about it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.ids import ID_PATTERN


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class EnvConfig(_Strict):
    id: str = Field("CartPole-v1", description="gymnasium environment id")
    solve_threshold: float = Field(475.0, description="mean evaluation return that marks the run solved")


class EpsilonSchedule(_Strict):
    start: Annotated[float, Field(ge=0, le=1)] = 1.0
    end: Annotated[float, Field(ge=0, le=1)] = 0.04
    decay_env_steps: Annotated[int, Field(ge=1, description="global env steps over which epsilon decays")] = 10_000

    def value(self, env_steps: int) -> float:
        """Linear decay on the run's global env-step count, so adding collectors does not slow the schedule."""
        frac = min(1.0, max(0, env_steps) / self.decay_env_steps)
        return self.start + frac * (self.end - self.start)


class CollectorConfig(_Strict):
    num_envs: Annotated[int, Field(ge=1, le=256, description="environments stepped in one process")] = 8
    chunk_steps: Annotated[int, Field(ge=1, le=4096, description="vector steps per payload chunk")] = 256
    epsilon: EpsilonSchedule = EpsilonSchedule()


class ReplayConfig(_Strict):
    capacity_transitions: Annotated[int, Field(ge=1, description="FIFO eviction above this many")] = 100_000
    min_transitions: Annotated[int, Field(ge=1, description="no sampling before this many")] = 1_000
    samples_per_insert: Annotated[
        float, Field(gt=0, description="target ratio of sampled transitions to inserted transitions")
    ] = 32.0
    tolerance_transitions: Annotated[
        int, Field(ge=1, description="how far either side may run ahead of the ratio before it must wait")
    ] = 8_192


class DQNConfig(_Strict):
    hidden: tuple[int, ...] = Field((256, 256), description="hidden layer widths of the Q network")
    learning_rate: Annotated[float, Field(gt=0)] = 2.3e-3
    gamma: Annotated[float, Field(gt=0, le=1)] = 0.99
    n_step: Annotated[int, Field(ge=1, le=32)] = 3
    batch_size: Annotated[int, Field(ge=1, le=4096)] = 64
    batches_per_request: Annotated[int, Field(ge=1, le=256, description="batches fetched per sample call")] = 16
    target_update_every: Annotated[int, Field(ge=1, description="iterations between target-net syncs")] = 100
    publish_every: Annotated[int, Field(ge=1, description="iterations between policy versions")] = 100
    report_every: Annotated[int, Field(ge=1, description="iterations between learn-info reports")] = 100
    checkpoint_every: Annotated[int, Field(ge=1, description="iterations between checkpoints")] = 2_000
    max_grad_norm: Annotated[float, Field(gt=0)] = 10.0
    double_q: bool = True


class EvalConfig(_Strict):
    episodes: Annotated[int, Field(ge=1, le=1000)] = 10
    num_envs: Annotated[int, Field(ge=1, le=256)] = 10

    @model_validator(mode="after")
    def _even_split(self) -> EvalConfig:
        if self.episodes % self.num_envs:
            raise ValueError(
                f"evaluation.episodes ({self.episodes}) must be a multiple of evaluation.num_envs "
                f"({self.num_envs}) so every env plays the same number of episodes"
            )
        return self


class BudgetConfig(_Strict):
    max_env_steps: Annotated[int, Field(ge=1)] = 1_000_000
    max_wall_seconds: Annotated[float, Field(gt=0)] = 1_800.0


class RunConfig(_Strict):
    name: str = Field("cartpole-dqn", pattern=ID_PATTERN, description="run directory name")
    seed: int = 0
    env: EnvConfig = EnvConfig()
    collector: CollectorConfig = CollectorConfig()
    replay: ReplayConfig = ReplayConfig()
    dqn: DQNConfig = DQNConfig()
    evaluation: EvalConfig = EvalConfig()
    budget: BudgetConfig = BudgetConfig()


def load_run_config(path: Path, overrides: dict[str, object] | None = None) -> RunConfig:
    """Read YAML, apply dotted overrides (``{"seed": 3, "budget.max_env_steps": 1000}``) and validate."""
    raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: top level must be a mapping, got {type(raw).__name__}")
    for dotted, value in (overrides or {}).items():
        node = raw
        *parents, leaf = dotted.split(".")
        for key in parents:
            child = node.get(key)
            if child is None:
                child = node[key] = {}
            if not isinstance(child, dict):
                raise ValueError(f"override {dotted!r}: {key!r} is a value, not a section")
            node = child
        node[leaf] = value
    return RunConfig.model_validate(raw)


def dump_run_config(config: RunConfig) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
