"""The run configuration: one validated model, loaded from YAML by the coordinator and handed to workers.

Workers never read the YAML themselves; they receive the parts they need inside their task, so a run is
described in exactly one place and a scaled-out collector cannot disagree with the coordinator about it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, cast

import annotated_types
import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.ids import ID_PATTERN


def chunk_rows_limit() -> int:
    """The most rows one chunk report may carry: `ChunkReport.env_steps`'s bound, read from the wire model so
    the number lives in one place. Imported when called: shared.wire imports this module."""
    from shared.wire import ChunkReport

    bounds = [m.le for m in ChunkReport.model_fields["env_steps"].metadata if isinstance(m, annotated_types.Le)]
    return min(cast(list[int], bounds))


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


class NetConfig(_Strict):
    """The policy network every service builds: a published state dict loads into any of them."""

    hidden: tuple[int, ...] = Field((256, 256), description="hidden layer widths")
    activation: Literal["relu", "tanh"] = "relu"


Algo = Literal["dqn", "ppo"]
SamplingUnit = Literal["transition", "sequence", "episode", "chunk"]
SamplerKind = Literal["uniform", "prioritized", "fifo", "lifo"]


class ReplayConfig(_Strict):
    """The coordinator's buffer: storage (a ring of transition slots), sampler and removers."""

    capacity_transitions: Annotated[int, Field(ge=1, description="FIFO eviction above this many")] = 100_000
    min_transitions: Annotated[int, Field(ge=1, description="no sampling before this many")] = 1_000
    samples_per_insert: Annotated[
        float, Field(gt=0, description="target ratio of sampled transitions to inserted transitions")
    ] = 32.0
    tolerance_transitions: Annotated[
        int, Field(ge=1, description="how far either side may run ahead of the ratio before it must wait")
    ] = 8_192
    sampler: SamplerKind = Field("uniform", description="uniform, prioritized (sum-tree), fifo or lifo (queues)")
    alpha: Annotated[float, Field(ge=0, le=1, description="prioritized: sampling probability ~ priority**alpha")] = 0.6
    beta_start: Annotated[float, Field(ge=0, le=1, description="prioritized: importance-weight exponent")] = 0.4
    beta_horizon: Annotated[
        int, Field(ge=1, description="prioritized: sampled transitions over which beta anneals to 1")
    ] = 1_000_000
    priority_epsilon: Annotated[float, Field(gt=0, description="added to |TD error| so no entry starves")] = 1e-6
    max_use: Annotated[int | None, Field(ge=1, description="drop an entry after it was sampled this often")] = None
    max_staleness: Annotated[
        int | None, Field(ge=0, description="drop entries whose policy version lags the latest by more")
    ] = None


class SamplingConfig(_Strict):
    """What one sample call returns and how collection is cut into chunks (one model for both sides)."""

    unit: SamplingUnit = Field("transition", description="transition, sequence (fixed length, never crossing "
                                                         "an episode end), whole episode, or whole chunk")
    sequence_length: Annotated[int, Field(ge=1, le=4096, description="steps per item for unit=sequence")] = 1
    min_traj_len: Annotated[int, Field(ge=1, description="unit=episode: shorter episodes are not served")] = 1
    max_traj_len: Annotated[int, Field(ge=1, le=4096, description="unit=episode: longer ones are not")] = 4096
    min_batch_size: Annotated[int, Field(ge=1, le=2**20, description="fewest transitions a sample returns")] = 1
    max_batch_size: Annotated[int, Field(ge=1, le=2**20, description="most transitions a sample returns")] = 2**20
    max_wait_seconds: Annotated[
        float, Field(ge=0, le=60, description="how long a sample call waits for data before a 409")
    ] = 1.0
    force_sync: bool = Field(False, description="on-policy lockstep: each collector waits for a newer policy "
                                                "after each chunk; implies max_policy_lag=0")
    max_policy_lag: Annotated[
        int | None, Field(ge=0, description="the learner only consumes data at most this many versions old")
    ] = None
    n_episode: Annotated[
        int | None, Field(ge=1, le=4096, description="cut chunks after this many finished episodes instead of "
                                                     "after collector.chunk_steps steps (n_sample)")
    ] = None

    @model_validator(mode="after")
    def _consistent(self) -> SamplingConfig:
        if self.min_batch_size > self.max_batch_size:
            raise ValueError(f"sampling.min_batch_size ({self.min_batch_size}) exceeds max_batch_size "
                             f"({self.max_batch_size})")
        if self.min_traj_len > self.max_traj_len:
            raise ValueError(f"sampling.min_traj_len ({self.min_traj_len}) exceeds max_traj_len "
                             f"({self.max_traj_len})")
        if self.force_sync and self.max_policy_lag not in (None, 0):
            raise ValueError("sampling.force_sync means max_policy_lag=0; leave max_policy_lag unset")
        return self

    @property
    def policy_lag(self) -> int | None:
        return 0 if self.force_sync else self.max_policy_lag


class DQNConfig(_Strict):
    net: NetConfig = NetConfig()
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


class PPOConfig(_Strict):
    """Defaults are rl-zoo's CartPole-v1 hyperparameters (separate 64x64 tanh actor and critic)."""

    net: NetConfig = NetConfig(hidden=(64, 64), activation="tanh")
    learning_rate: Annotated[float, Field(gt=0)] = 1e-3
    gamma: Annotated[float, Field(gt=0, le=1)] = 0.98
    gae_lambda: Annotated[float, Field(ge=0, le=1)] = 0.8
    clip_range: Annotated[float, Field(gt=0)] = 0.2
    epochs: Annotated[int, Field(ge=1, le=1000, description="passes over each batch")] = 20
    minibatch_size: Annotated[int, Field(ge=1, le=2**20)] = 256
    value_coef: Annotated[float, Field(ge=0)] = 0.5
    entropy_coef: Annotated[float, Field(ge=0)] = 0.0
    max_grad_norm: Annotated[float, Field(gt=0)] = 0.5
    normalize_advantages: bool = True
    report_every: Annotated[int, Field(ge=1, description="updates between learn-info reports")] = 1
    checkpoint_every: Annotated[int, Field(ge=1, description="updates between checkpoints")] = 50


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
    algo: Algo = "dqn"
    env: EnvConfig = EnvConfig()
    collector: CollectorConfig = CollectorConfig()
    replay: ReplayConfig = ReplayConfig()
    sampling: SamplingConfig = SamplingConfig()
    dqn: DQNConfig = DQNConfig()
    ppo: PPOConfig = PPOConfig()
    evaluation: EvalConfig = EvalConfig()
    budget: BudgetConfig = BudgetConfig()

    @model_validator(mode="after")
    def _servable(self) -> RunConfig:
        """Reject combinations the buffer cannot serve at load time, not at the first sample call."""
        queue = self.replay.sampler in ("fifo", "lifo")
        unit = self.sampling.unit
        if queue and self.replay.max_use is None:
            raise ValueError(f"replay.sampler={self.replay.sampler} serves the same chunks forever unless they are "
                             f"consumed: set replay.max_use (1 for on-policy data)")
        if queue and unit != "chunk":
            raise ValueError(f"replay.sampler={self.replay.sampler} is a queue of whole chunks: set "
                             f"sampling.unit=chunk (got {unit})")
        if self.algo == "dqn" and unit != "transition":
            raise ValueError(f"the DQN learner trains on transitions: set sampling.unit=transition (got {unit})")
        if self.algo == "ppo" and unit != "chunk":
            raise ValueError(f"the PPO learner trains on whole chunks: set sampling.unit=chunk (got {unit})")
        if self.sampling.policy_lag is not None and self.replay.max_staleness not in (None, self.sampling.policy_lag):
            raise ValueError(f"replay.max_staleness ({self.replay.max_staleness}) contradicts the sampling "
                             f"policy lag ({self.sampling.policy_lag}); set only one")
        self._chunks_fit()
        return self

    def _chunks_fit(self) -> None:
        """A chunk (num_envs x chunk_steps rows) must fit in one chunk report and in the buffer; otherwise every
        collector's first report is refused, or evicts itself, long after the run started."""
        envs, steps = self.collector.num_envs, self.collector.chunk_steps
        rows = envs * steps
        chunk = f"a chunk of collector.num_envs x collector.chunk_steps = {envs} x {steps} = {rows:,} rows"
        wire = chunk_rows_limit()
        if rows > wire:
            raise ValueError(f"{chunk} exceeds the {wire:,} rows one chunk report may carry: set "
                             f"collector.chunk_steps <= {wire // envs}")
        capacity = self.replay.capacity_transitions
        if rows > capacity:
            smaller = (f"collector.chunk_steps <= {capacity // envs}" if capacity >= envs
                       else f"collector.num_envs <= {capacity}")
            raise ValueError(f"{chunk} does not fit in replay.capacity_transitions ({capacity:,}): set it to at "
                             f"least {rows} or set {smaller}")

    @property
    def net(self) -> NetConfig:
        """The network of the policy being trained, which collectors and the evaluator must build too."""
        return self.ppo.net if self.algo == "ppo" else self.dqn.net

    @property
    def max_staleness(self) -> int | None:
        return self.sampling.policy_lag if self.sampling.policy_lag is not None else self.replay.max_staleness


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
