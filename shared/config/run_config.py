"""The run configuration: one validated model, loaded from YAML by the coordinator and handed to workers.

Workers never read the YAML themselves; they receive the parts they need inside their task, so a run is
described in exactly one place and a scaled-out collector cannot disagree with the coordinator about it.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Annotated, Literal, cast

import annotated_types
import yaml
from pydantic import Field, model_validator

from rlfleet.shared.algorithms import DEFAULT, REGISTRY, AlgoConfig, default_params, spec_of
from rlfleet.shared.config.base import EpsilonSchedule, NetConfig, Strict
from rlfleet.shared.config.battle import BattleBar, SelfPlayConfig, check_against, is_two_player
from rlfleet.shared.config.env import EnvConfig
from rlfleet.shared.config.hooks import MAX_HOOKS, HookConfig
from rlfleet.shared.config.samplers import SAMPLERS, SamplerKind, SamplerTraits
from rlfleet.shared.config.tracking import TrackingConfig
from rlfleet.shared.envs.seeds import MAX_RUN_SEED
from rlfleet.shared.ids import ID_PATTERN
from rlfleet.shared.loops import loop_of


def chunk_rows_limit() -> int:
    """The most rows one chunk report may carry: `ChunkReport.env_steps`'s bound, read from the wire model so
    the number lives in one place. Imported when called: shared.wire imports this module."""
    from rlfleet.shared.wire import ChunkReport

    bounds = [m.le for m in ChunkReport.model_fields["env_steps"].metadata if isinstance(m, annotated_types.Le)]
    return min(cast(list[int], bounds))


EnvBackend = Literal["sync", "async", "envpool"]  # shared/envs/vector.py builds each


class CollectorConfig(Strict):
    num_envs: Annotated[int, Field(ge=1, le=256, description="environments stepped in one process")] = 8
    chunk_steps: Annotated[int, Field(ge=1, le=4096, description="vector steps per payload chunk")] = 256
    epsilon: EpsilonSchedule = EpsilonSchedule()
    """Epsilon-greedy schedule on the run's env steps (q_values heads)."""
    report_batch: Annotated[int, Field(ge=1, le=64, description=(
        "chunk reports per request: above 1, written chunks are reported together (POST /v1/chunk-batches) "
        "once this many are held or the oldest waited report_delay_seconds; for fleets of hundreds of "
        "collectors"))] = 1
    report_delay_seconds: Annotated[float, Field(gt=0, le=30, description=(
        "longest a written chunk's report is held for its batch (report_batch > 1)"))] = 2.0
    compression: Literal["none", "zstd"] | None = Field(None, description=(
        "payload arrays zstd-compressed or stored as they are; "
        "null (the default): zstd for frame-stacked image runs, whose chunks it makes ~100x smaller on Pong at "
        "a few ms per chunk (docs/performance.md), none for every other run, where it saves little"))
    env_backend: EnvBackend = Field("sync", description=(
        "how the collector steps its envs: sync (one process, gymnasium's SyncVectorEnv), async (one "
        "subprocess per env, gymnasium's AsyncVectorEnv: for envs whose step costs more than the pipe), or "
        "envpool (EnvPool's C++ thread pool, for an env id EnvPool has, without wrappers; the envpool extra)"))
    double_buffer: bool = Field(False, description=(
        "async only: step half of the envs while the policy acts for the other half, so the forward pass is "
        "off the envs' critical path (Sample Factory's double-buffered sampling); every env still steps once "
        "per chunk row"))

    @model_validator(mode="after")
    def _double_buffer_fits(self) -> CollectorConfig:
        if self.double_buffer and self.env_backend != "async":
            raise ValueError(f"collector.double_buffer steps two halves of the envs in subprocesses while the "
                             f"policy acts, which needs collector.env_backend: async (it is "
                             f"{self.env_backend}); set env_backend: async or leave double_buffer off")
        if self.double_buffer and self.num_envs < 2:
            raise ValueError("collector.double_buffer splits the envs into two halves: set collector.num_envs "
                             "to 2 or more, or leave double_buffer off")
        return self

    def payload_compression(self, stacked: bool) -> Literal["none", "zstd"]:
        """What collectors write: `compression`, or its default for a run whose chunks are `stacked` frames."""
        return self.compression or ("zstd" if stacked else "none")


SamplingUnit = Literal["transition", "sequence", "episode", "chunk"]


class ReplayConfig(Strict):
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

    @property
    def traits(self) -> SamplerTraits:
        """What the configured sampler is (shared/config/samplers.py): what callers ask instead of comparing names."""
        return SAMPLERS[self.sampler]


class SamplingConfig(Strict):
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


class EvalConfig(Strict):
    """Validation (every policy version, `episodes` on validation seeds) picks candidates; a held-out test
    (`test_episodes` on test seeds, disjoint from every training and validation seed) confirms one."""

    episodes: Annotated[int, Field(ge=1, le=1000, description="validation episodes per policy version")] = 10
    num_envs: Annotated[int, Field(ge=1, le=256)] = 10
    """Copies of the env per validation; an env with its own vectorized implementation registered in gymnasium
    (CartPole) plays one env per episode on it instead (evaluator/episodes.py)."""
    test_episodes: Annotated[int, Field(ge=2, le=100_000, description=(
        "held-out test episodes that must confirm a validation pass before the run counts as solved; at least 2, "
        "since the solve rule bounds a re-test by the test's spread, which one episode cannot show"))] = 100
    test_num_envs: Annotated[int, Field(ge=1, le=256)] = 10
    """Copies of the env per held-out test (as num_envs)."""
    every_versions: Annotated[int, Field(ge=1, le=100_000)] = 1
    """Validate at most one policy version in this many (1: every version); a live setting."""
    against: dict[str, BattleBar] = Field(default_factory=dict, description=(
        "two-player games: the solve rule, a bar per baseline opponent (e.g. random: {min_win_or_draw: 0.95}, "
        "lookahead: {min_win: 0.6}); validation plays `episodes` games and the held-out test `test_episodes` "
        "games against each, and the run is solved when a test meets every bar. Empty: the mean return against "
        "env.solve_threshold"))

    @model_validator(mode="after")
    def _baselines(self) -> EvalConfig:
        check_against(self.against)
        return self

    @model_validator(mode="after")
    def _even_split(self) -> EvalConfig:
        for episodes, envs, prefix in ((self.episodes, self.num_envs, ""), (self.test_episodes, self.test_num_envs,
                                                                           "test_")):
            if episodes % envs:
                raise ValueError(
                    f"evaluation.{prefix}episodes ({episodes}) must be a multiple of evaluation.{prefix}num_envs "
                    f"({envs}) so every env plays the same number of episodes")
        return self


MAX_REPLICAS = 64


class LearnerConfig(Strict):
    replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS, description=(
        "learner processes training as one data-parallel group (torch.distributed): each samples an equal share "
        "of every batch and DistributedDataParallel averages their gradients; 1: a single learner"))] = 1
    rendezvous: str = Field("127.0.0.1:29400", pattern=r"^[A-Za-z0-9.-]+:[0-9]{1,5}$", description=(
        "host:port of the learner group's c10d rendezvous (torchrun --rdzv-endpoint): the rank whose host it "
        "names serves it; in compose the first learner service's name, on Kubernetes a headless service"))
    rendezvous_timeout_seconds: Annotated[float, Field(ge=5, le=3600, description=(
        "how long a learner waits for the group's rendezvous (its host to resolve and listen, then every rank to "
        "join) before it exits with an error naming learner.rendezvous"))] = 120.0
    group_restarts: Annotated[int, Field(ge=0, le=1000, description=(
        "how often torchrun re-forms a learner group after a rank failed (all ranks resume from the newest "
        "checkpoint) before `rlfleet learner` gives up"))] = 10
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description=(
        "where the learner trains: auto takes a GPU when torch sees one, cuda requires one"))
    amp: Literal["none", "bf16"] = Field("none", description=(
        "mixed precision on CUDA: bf16 runs each update under torch.autocast (bfloat16 matmuls and convolutions, "
        "float32 weights and optimizer state); a learner on the CPU trains in float32"))
    hooks: tuple[HookConfig, ...] = Field((), max_length=MAX_HOOKS, description=(
        "your functions the learner calls at start, every N updates, after each publish and at the end, each "
        "with a read-only HookView (shared/config/hooks.py); one that raises is switched off and shown in status"))

    @model_validator(mode="after")
    def _amp_on_cuda(self) -> LearnerConfig:
        if self.amp != "none" and self.device == "cpu":
            raise ValueError(f"learner.amp ({self.amp}) is mixed precision on CUDA: set learner.device to auto or "
                             "cuda, or learner.amp to none")
        return self

    @model_validator(mode="after")
    def _port(self) -> LearnerConfig:
        port = int(self.rendezvous.rpartition(":")[2])
        if not 1 <= port <= 65535:
            raise ValueError(f"learner.rendezvous ({self.rendezvous}): the port must be 1..65535")
        return self

    @model_validator(mode="after")
    def _distinct_hooks(self) -> LearnerConfig:
        """A hook's name (function@event) identifies it in logs and status, so each may appear once."""
        names = [hook.name for hook in self.hooks]
        for index, name in enumerate(names):
            if name in names[:index]:
                raise ValueError(f"learner.hooks[{index}]: repeats learner.hooks[{names.index(name)}] ({name}); "
                                 f"list a function once per event")
        return self


class BudgetConfig(Strict):
    max_env_steps: Annotated[int, Field(ge=1)] = 1_000_000
    """The run ends (budget_exhausted) at this many env steps."""
    max_wall_seconds: Annotated[float, Field(gt=0)] = 1_800.0
    """The run ends (budget_exhausted) after this many seconds."""


class RunConfig(Strict):
    name: str = Field("run", pattern=ID_PATTERN, description="run directory name")
    seed: Annotated[int, Field(ge=0, le=MAX_RUN_SEED, description="every env, actor and learner seed derives "
                                                                  "from it (shared/envs/seeds.py)")] = 0
    algo: AlgoConfig = Field(default_factory=default_params, description=(
        "the algorithm and its hyperparameters: `name` picks one from the registry (shared/algorithms)"))
    env: EnvConfig = EnvConfig()
    """The environment."""
    collector: CollectorConfig = CollectorConfig()
    """Collector settings."""
    replay: ReplayConfig = ReplayConfig()
    """Replay buffer."""
    sampling: SamplingConfig = SamplingConfig()
    """What and how the learner samples."""
    deterministic: bool = Field(False, description=(
        "reproducible mode: one collector in lockstep with the learner, seeded and single-threaded everywhere; "
        "two runs of the same seed publish byte-identical policy files"))
    learner: LearnerConfig = LearnerConfig()
    """Learner process settings."""
    evaluation: EvalConfig = EvalConfig()
    """Validation and held-out tests."""
    budget: BudgetConfig = BudgetConfig()
    """When the run gives up."""
    self_play: SelfPlayConfig | None = None
    """Two-player games: collectors play against the latest version, a pool of earlier ones and baselines."""
    tracking: TrackingConfig = TrackingConfig()
    """Experiment trackers (Weights & Biases offline, MLflow) fed with the run's curves, config and artifacts."""

    @model_validator(mode="before")
    @classmethod
    def _named_section(cls, raw: object) -> object:
        """Configs of earlier releases name the algorithm (`algo: <name>`) and keep its parameters in a section
        of that name (`<name>: {...}`); earlier run dumps hold every algorithm's section. Fold that into `algo`.
        An algo section without a name is the default algorithm's, the one a config without the section trains."""
        if not isinstance(raw, dict):
            return raw
        algo = raw.get("algo", DEFAULT)
        if isinstance(algo, dict) and "name" not in algo:  # an algo section (or `--set algo.x=`) without a name
            return {**raw, "algo": {**algo, "name": DEFAULT}}  # tunes the algorithm a config without one runs
        if not isinstance(algo, str):
            return raw
        raw = dict(raw)
        sections = {name: raw.pop(name) for name in REGISTRY if name in raw}
        section = sections.get(algo) or {}
        raw["algo"] = {**section, "name": algo} if isinstance(section, dict) else section
        return raw

    @model_validator(mode="after")
    def _servable(self) -> RunConfig:
        """Reject combinations the buffer cannot serve at load time, not at the first sample call."""
        queue = self.replay.traits.queue
        unit = self.sampling.unit
        if queue and self.replay.max_use is None:
            raise ValueError(f"replay.sampler={self.replay.sampler} serves the same chunks forever unless they are "
                             f"consumed: set replay.max_use (1 for on-policy data)")
        if queue and unit != "chunk":
            raise ValueError(f"replay.sampler={self.replay.sampler} is a queue of whole chunks: set "
                             f"sampling.unit=chunk (got {unit})")
        spec_of(self.algo).check(self)
        if self.deterministic and self.sampling.n_episode is not None:
            raise ValueError("deterministic runs cut chunks after a fixed number of steps: leave sampling.n_episode "
                             "unset")
        if self.sampling.policy_lag is not None and self.replay.max_staleness not in (None, self.sampling.policy_lag):
            raise ValueError(f"replay.max_staleness ({self.replay.max_staleness}) contradicts the sampling "
                             f"policy lag ({self.sampling.policy_lag}); set only one")
        self._chunks_fit()
        return self

    @model_validator(mode="after")
    def _two_player(self) -> RunConfig:
        """Self-play and battle rules need a game of shared/envs/two_player.py and an algorithm that collects."""
        asked = [name for name, on in (("self_play", self.self_play is not None),
                                       ("evaluation.against", bool(self.evaluation.against))) if on]
        if asked and not is_two_player(self.env.id):
            verb = "need" if len(asked) > 1 else "needs"
            raise ValueError(f"{' and '.join(asked)} {verb} a two-player game (rlfleet/TicTacToe-v0, "
                             f"rlfleet/ConnectFour-v0), not {self.env.id}")
        if self.self_play is not None:
            if "opponent" in self.env.kwargs:
                raise ValueError("self_play.weights decide each game's opponent: drop env.kwargs.opponent")
            loop = loop_of(spec_of(self.algo).loop)
            if not loop.collects:
                raise ValueError(f"self_play needs collectors playing games; {self.algo.name} trains on "
                                 f"{loop.name} results")
            if self.collector.env_backend != "sync":
                raise ValueError(f"collector.env_backend: {self.collector.env_backend}: self_play's opponents are "
                                 f"policies the collector swaps into its games as they are published, which only "
                                 f"the sync backend keeps in the collector's process; set env_backend: sync")
        return self

    def _chunks_fit(self) -> None:
        """A chunk (num_envs x chunk_steps rows) must fit in one chunk report, its report in one request, and the
        chunk in the buffer; otherwise every collector's first report is refused (422 or 413), or evicts itself,
        long after the run started."""
        from rlfleet.shared.wire import (  # imported when called: shared.wire imports this
            MAX_BODY_BYTES,
            report_bytes_bound,
        )

        envs, steps = self.collector.num_envs, self.collector.chunk_steps
        rows = envs * steps
        chunk = f"a chunk of collector.num_envs x collector.chunk_steps = {envs} x {steps} = {rows:,} rows"
        wire = chunk_rows_limit()

        def fits(s: int) -> bool:
            return envs * s <= wire and report_bytes_bound(envs, envs * s) <= MAX_BODY_BYTES

        if not fits(steps):
            # Both bounds grow with the steps: the longest chunk within them, found by bisection.
            longest = bisect.bisect_right(range(1, steps), False, key=lambda s: not fits(s))
            fix = f"collector.chunk_steps <= {longest}" if longest else f"collector.num_envs < {envs}"
            if rows > wire:
                raise ValueError(f"{chunk} exceeds the {wire:,} rows one chunk report may carry: set {fix}")
            raise ValueError(f"{chunk}: its report may take {report_bytes_bound(envs, rows):,} bytes (every row "
                             f"ending an episode), above the coordinator's {MAX_BODY_BYTES:,}-byte request limit, "
                             f"and would be refused (413): set {fix}")
        capacity = self.replay.capacity_transitions
        if rows > capacity:
            smaller = (f"collector.chunk_steps <= {capacity // envs}" if capacity >= envs
                       else f"collector.num_envs <= {capacity}")
            raise ValueError(f"{chunk} does not fit in replay.capacity_transitions ({capacity:,}): set it to at "
                             f"least {rows} or set {smaller}")

    @property
    def net(self) -> NetConfig:
        """The network of the policy being trained, which collectors and the evaluator must build too."""
        return self.algo.net

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
