"""What one algorithm declares to the rest of rlfleet: its registry entry.

An `AlgorithmSpec` names the algorithm's hyperparameter model (a pydantic model with a `name` literal, so
run configs and wire models carry it as one discriminated union), the action head it publishes for given
spaces, how its collectors act (`Behaviour`), what it needs from the buffer, and where its learner lives
(a `module:Class` path, imported only by learner processes, so the registry itself stays torch-free).

Every algorithm runs on one of the loop kinds registered in shared/loops/ (replay, sequences, chunks, population,
dataset), named by `AlgorithmSpec.loop`; the kind's parameter model here (`ReplayParams`, `SequenceParams`,
`ChunkParams`, `PopulationParams`, `DatasetParams`) is the base of the algorithm's, and the kind's entry refuses
buffer settings it cannot train on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, ClassVar

from pydantic import Field, model_validator

from rlfleet.shared.config.base import NetConfig, Strict
from rlfleet.shared.config.schedules import SCHEDULABLE, Schedule
from rlfleet.shared.config.values import CriticValue
from rlfleet.shared.loops import loop_of
from rlfleet.shared.payloads.recordings import NAME_PATTERN
from rlfleet.shared.payloads.spaces import BoxActions, MultiDiscreteActions, Spaces
from rlfleet.shared.policy.manifest import Behaviour, Head

if TYPE_CHECKING:
    from rlfleet.shared.config.run_config import RunConfig

# Settings an operator may change while the run trains (`PATCH /v1/run/settings`), as dotted config paths. Each
# registry entry lists its own: nothing outside the registry decides by an algorithm's name what is live.
EVALUATION_LIVE = ("evaluation.every_versions",)
REPLAY_LIVE = (*EVALUATION_LIVE, "replay.samples_per_insert")


class AlgoParams(Strict):
    """Fields every algorithm has. Subclasses add `name: Literal["..."]` and their hyperparameters."""

    name: str
    """The wrapper's name in the env's wrappers list."""
    net: NetConfig = NetConfig()
    """The policy network's hidden layers and activation."""
    report_every: Annotated[int, Field(ge=1, description="updates between learn-info reports")] = 100
    checkpoint_every: Annotated[int, Field(ge=1, description="updates between checkpoints")] = 2_000
    schedules: dict[str, Schedule] = Field(default_factory=dict, description=(
        "fields of this algorithm that change as the run trains, each from its configured value (shared/config/"
        "schedules.py): learning_rate, entropy_coef, clip_range or clip_ratio, e.g. {learning_rate: {kind: linear, "
        "end: 0, over: 100000}}"))
    # One actor and one critic trained on the same loss (learner_worker/actor_critic.py): only such algorithms
    # can share their trunk, so only they take `net.trunk`.
    actor_critic: ClassVar[bool] = False

    @model_validator(mode="after")
    def _schedules_fit(self) -> AlgoParams:
        for field in self.schedules:
            if field not in SCHEDULABLE or field not in type(self).model_fields:
                able = [name for name in SCHEDULABLE if name in type(self).model_fields]
                raise ValueError(f"algo.schedules: {self.name} has no schedulable field {field!r}: schedule "
                                 f"{', '.join(able) or 'nothing'}")
            if getattr(self, field) is None:
                raise ValueError(f"algo.schedules.{field}: algo.{field} is null (off); set its starting value")
        return self

    @model_validator(mode="after")
    def _net_fits_the_algorithm(self) -> AlgoParams:
        if self.net.trunk is not None and not self.actor_critic:
            raise ValueError(f"algo.net.trunk is for algorithms with an actor and a critic that may share their "
                             f"encoder; {self.name} has no such pair: leave algo.net.trunk out")
        if self.net.init != "torch" and not self.actor_critic:
            raise ValueError(f"algo.net.init is for algorithms with an actor and a critic; {self.name} has no such "
                             f"pair: leave algo.net.init out")
        if self.net.trunk == "separate_core" and self.net.core is None:
            raise ValueError("algo.net.trunk: separate_core gives the critic a recurrent core of its own beside the "
                             "actor's, so it needs algo.net.core (e.g. {kind: lstm, hidden: 64}); without a core "
                             "use separate or shared")
        return self


class ReplayParams(AlgoParams):
    """The replay loop's knobs: n-step targets are built by the learner's chunk cache from these."""

    gamma: Annotated[float, Field(gt=0, le=1)] = 0.99
    """Discount factor."""
    n_step: Annotated[int, Field(ge=1, le=32)] = 1
    """N-step return length (never reaches past a chunk's end)."""
    batch_size: Annotated[int, Field(ge=1, le=4096)] = 64
    """Transitions per gradient step."""
    batches_per_request: Annotated[int, Field(ge=1, le=256, description="batches fetched per sample call")] = 16
    publish_every: Annotated[int, Field(ge=1, description=(
        "updates between policy versions, at most: a due version is written once the coordinator has acknowledged "
        "env steps since the previous one (collectors paused or stalled would never load it)"))] = 100


class SequenceParams(ReplayParams):
    """The sequence loop's knobs (shared/loops/sequences.py): replay batches of `batch_size` sequences of
    `sampling.sequence_length` steps of one env, each warmed up over at least `burn_in` rows before it."""

    batch_size: Annotated[int, Field(ge=1, le=4096)] = 32
    """Sequences per gradient step (each `sampling.sequence_length` steps)."""
    burn_in: Annotated[int, Field(ge=0, le=4096)] = 8
    """Rows a sequence's core state is unrolled through, without gradient, before its first trained row (the
    burn-in of Kapturowski et al., 2019): a row is trained on only once the current weights have carried the state
    over this many rows of its chunk since the stored one, or since its episode began inside the chunk.
    sampling.sequence_length + burn_in must fit in collector.chunk_steps."""


class ChunkParams(AlgoParams):
    """The chunk loop publishes after every update (with force_sync always; otherwise once the coordinator has
    acknowledged env steps since the previous version): collectors acting on old policies is the lag it bounds."""

    # Not every update: each report is a request the next update waits for (on-policy CartPole: 9% of the
    # learner's time at 15 updates/s); every 10th still gives loss curves a row per second or less.
    report_every: Annotated[int, Field(ge=1, description="updates between learn-info reports")] = 10
    checkpoint_every: Annotated[int, Field(ge=1, description="updates between checkpoints")] = 50


class ClippedSurrogateParams(ChunkParams):
    """The knobs of the learners that take clipped importance-ratio steps on GAE advantages over fresh chunks
    (learner_worker/surrogate.py), memoryless or recurrent: one model, so both read and default them alike.
    Defaults are rl-zoo's CartPole-v1 hyperparameters."""

    learning_rate: Annotated[float, Field(gt=0)] = 1e-3
    """Optimizer step size."""
    gamma: Annotated[float, Field(gt=0, le=1)] = 0.98
    """Discount factor."""
    gae_lambda: Annotated[float, Field(ge=0, le=1)] = 0.8
    """GAE lambda."""
    clip_range: Annotated[float, Field(gt=0)] = 0.2
    """The ratio clip of the surrogate objective."""
    epochs: Annotated[int, Field(ge=1, le=1000, description="passes over each batch")] = 20
    minibatch_size: Annotated[int, Field(ge=1, le=2**20)] = 256
    """Rows per minibatch (a recurrent learner takes them as whole env sequences)."""
    value_coef: Annotated[float, Field(ge=0)] = 0.5
    """Weight of the value loss."""
    entropy_coef: Annotated[float, Field(ge=0)] = 0.0
    """Weight of the entropy bonus."""
    max_grad_norm: Annotated[float, Field(gt=0)] = 0.5
    """Gradients are clipped to this global norm."""
    normalize_advantages: bool = True
    """Normalise advantages per minibatch."""
    log_std_init: Annotated[float, Field(ge=-5, le=2, description="gaussian head: initial log-std")] = 0.0
    sde_sample_freq: Annotated[int | None, Field(ge=1, le=2**20)] = None
    """Box actions: generalized state-dependent exploration (gSDE, Raffin et al. 2022; SB3's `use_sde` with this
    `sde_sample_freq`): the policy's noise is its last hidden layer's features times weights that each env keeps
    for this many steps, a smooth function of the state instead of fresh noise every step; the published head is
    `gaussian_sde` (shared/policy/manifest.py). Null: independent gaussian noise every step."""
    value: CriticValue = CriticValue()
    """The critic's value representation: Pohlen's transform, a scalar or categorical head."""


class VtraceParams(ChunkParams):
    """The knobs of the V-trace actor-critics (Espeholt et al. 2018; learner_worker/vtrace_step.py), memoryless or
    recurrent: one model, so both read and default them alike. Defaults follow the paper: rho_bar = c_bar = 1, one
    gradient step per batch, the plain policy gradient (no clip_ratio), gradients clipped at a norm of 40. One
    update is cheap, so learn-info reports and checkpoints come less often than the chunk loop's defaults."""

    checkpoint_every: Annotated[int, Field(ge=1, description="updates between checkpoints")] = 500
    learning_rate: Annotated[float, Field(gt=0)] = 1e-3
    """Optimizer step size."""
    epochs: Annotated[int, Field(ge=1, le=100, description=(
        "gradient steps per batch, each after re-running V-trace with the updated networks"))] = 1
    gamma: Annotated[float, Field(gt=0, le=1)] = 0.99
    """Discount factor."""
    rho_bar: Annotated[float, Field(gt=0, description="truncation of the importance weights in the TD errors")] = 1.0
    c_bar: Annotated[float, Field(gt=0, description="truncation of the trace coefficients (how far back)")] = 1.0
    vtrace_lambda: Annotated[float, Field(ge=0, le=1, description="scales every trace coefficient c")] = 1.0
    clip_ratio: Annotated[float | None, Field(gt=0, lt=1, description=(
        "APPO's trust region: the policy term becomes the clipped surrogate of the ratio pi/mu (current policy "
        "over the one that acted, itself the importance weight) on the V-trace advantages without their rho, "
        "clipped to [1 - clip_ratio, 1 + clip_ratio], so several epochs on one batch stay near the data; null: the "
        "paper's plain policy gradient"))] = None
    normalize_advantages: bool = False
    """Scale each step's V-trace advantages to mean 0 and std 1 over its valid rows (the batch's, or a minibatch's
    where the learner takes minibatch steps; in a learner group, every rank's), as Sample Factory's APPO does: the
    policy term then has the same size whatever the rewards' scale, and entropy_coef keeps its meaning. false: the
    paper's raw advantages."""
    value_coef: Annotated[float, Field(ge=0)] = 0.5
    """Weight of the value loss."""
    entropy_coef: Annotated[float, Field(ge=0)] = 0.01
    """Weight of the entropy bonus."""
    max_grad_norm: Annotated[float, Field(gt=0)] = 40.0
    """Gradients are clipped to this global norm."""
    log_std_init: Annotated[float, Field(ge=-5, le=2, description="gaussian head: initial log-std")] = 0.0
    value: CriticValue = CriticValue()
    """The critic's value representation: Pohlen's transform, a scalar or categorical head."""



class PopulationParams(AlgoParams):
    """The population loop's knobs: how a generation is evaluated and when the learner stops waiting for it."""

    report_every: Annotated[int, Field(ge=1, description="generations between learn-info reports")] = 1
    checkpoint_every: Annotated[int, Field(ge=1, description="generations between checkpoints")] = 10
    population: Annotated[int, Field(ge=2, le=10_000, description="members per generation")] = 32
    episodes_per_member: Annotated[int, Field(ge=1, le=256, description="greedy episodes per member")] = 1
    max_steps_per_member: Annotated[int | None, Field(ge=1, description=(
        "cap on a member's env steps over its episodes; null: play them to their end"))] = None
    min_fraction: Annotated[float, Field(gt=0, le=1, description=(
        "a generation completes once this fraction of its members has reported"))] = 0.9
    generation_timeout_seconds: Annotated[float, Field(gt=0, description=(
        "a generation completes with what has arrived after this long"))] = 60.0
    member_lease_seconds: Annotated[float, Field(gt=0, le=3600, description=(
        "a claimed member not reported within this is offered to another collector"))] = 30.0


class DatasetParams(AlgoParams):
    """The dataset loop's knobs: which recording, how many epochs over its train split, batches of what size."""

    dataset: str = Field(pattern=NAME_PATTERN, description=(
        "the recorded dataset to train on (`rlfleet record --name`), in the data directory's dataset store"))
    epochs: Annotated[int, Field(ge=1, le=100_000, description=(
        "passes over the train split; the run ends (budget_exhausted) after the last unless solved before"))] = 50
    batch_size: Annotated[int, Field(ge=1, le=4096, description="transitions per gradient step")] = 256
    publish_every: Annotated[int, Field(ge=1, description=(
        "updates between policy versions (one is also published at the end of every epoch)"))] = 1_000
    report_every: Annotated[int, Field(ge=1, description="updates between learn-info reports")] = 20
    checkpoint_every: Annotated[int, Field(ge=1, description="updates between checkpoints")] = 500


def sampled_head(spaces: Spaces) -> Head:
    """The head of a policy-gradient actor, which acts in any action space: a gaussian for Box actions, one
    categorical per sub-action for MultiDiscrete, a categorical otherwise."""
    if isinstance(spaces.action, BoxActions):
        return "gaussian"
    if isinstance(spaces.action, MultiDiscreteActions):
        return "multi_categorical"
    return "categorical"


def sde_fits(config: RunConfig, spaces: Spaces) -> None:
    """gSDE perturbs continuous actions: refuse `algo.sde_sample_freq` for any other action space."""
    if isinstance(config.algo, ClippedSurrogateParams) and config.algo.sde_sample_freq is not None \
            and not isinstance(spaces.action, BoxActions):
        raise ValueError(f"algo.sde_sample_freq explores Box actions; env {config.env.id!r} has {spaces.action.kind} "
                         f"actions: remove it (exploration there is the categorical's own)")


def sampling_behaviour(config: RunConfig, spaces: Spaces) -> Behaviour:
    """Collectors of policy-gradient learners draw from the policy and record each action's log-prob (and, for a
    policy with a recurrent core, each env's core state at a chunk's first row); with gSDE, from a gaussian_sde
    head whose weights each env keeps `sde_sample_freq` steps."""
    freq = config.algo.sde_sample_freq if isinstance(config.algo, ClippedSurrogateParams) else None
    if not isinstance(spaces.action, BoxActions):
        freq = None  # the preflight refused the field for these actions (sde_fits)
    return Behaviour(head="gaussian_sde" if freq else sampled_head(spaces), sample=True, core=config.algo.net.core,
                     sde_sample_freq=freq)


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    """The algorithm's name in a run config (`algo.name`)."""
    summary: str
    params: type[AlgoParams]
    loop: str  # the name of its loop kind in shared/loops/ (LOOPS)
    learner: str  # "module:Class", imported by learner processes only
    head: Callable[[Spaces], Head]  # the published action head; raises ValueError for spaces it cannot act in
    behaviour: Callable[[RunConfig, Spaces], Behaviour]
    # The dotted settings that may change while the run trains, besides those every algorithm derives in
    # __post_init__ (its schedulable hyperparameters and their schedules).
    live: tuple[str, ...] = EVALUATION_LIVE
    # Further checks of the config against the env's spaces, made by the preflight (shared/config/preflight.py), not
    # by validation, since the spaces come from building the env; raises ValueError naming a field.
    fits: Callable[[RunConfig, Spaces], None] | None = None
    # The parameters each rank of a learner group (learner.replicas > 1) takes an equal share of; None: the learner
    # cannot train data-parallel, so the run keeps one learner process.
    shares: tuple[str, ...] | None = None
    # Whether the learner trains a recurrent core (`algo.net.core`) from the chunks' stored core states; every
    # other algorithm refuses one at config load.
    recurrent: bool = False

    def __post_init__(self) -> None:
        """Every schedulable hyperparameter the algorithm has (learning rate, entropy coefficient, clip range or
        ratio) is live, and so is its schedule: the learner reads them at every update, re-reads its task when the
        settings change (learner_worker/trainer.py) and takes them up as it takes up schedules, and the coordinator
        makes a changed schedule continue from where the run stands (shared/config/schedules.py)."""
        fields = [field for field in SCHEDULABLE if field in self.params.model_fields]
        derived = [key for field in fields for key in (f"algo.{field}", f"algo.schedules.{field}")]
        object.__setattr__(self, "live", (*self.live, *(key for key in derived if key not in self.live)))

    def _splits(self, config: RunConfig) -> None:
        """A learner group needs every shared quantity split into equal shares: each rank's loss is a mean over
        its share, and DistributedDataParallel averages them, which equals the mean over the whole batch only for
        equal shares (learner_worker/distributed.py)."""
        replicas = config.learner.replicas
        if replicas == 1:
            return
        if self.shares is None:
            raise ValueError(f"{self.name} trains in one learner process: set learner.replicas=1 (got {replicas})")
        if config.deterministic:
            raise ValueError(f"deterministic runs train in one learner process: set learner.replicas=1 "
                             f"(got {replicas})")
        for field in self.shares:
            value = getattr(config.algo, field)
            if value % replicas:
                raise ValueError(f"algo.{field} ({value}) must be a multiple of learner.replicas ({replicas}) so "
                                 f"every rank of the learner group takes an equal share")

    def check(self, config: RunConfig) -> None:
        """Refuse a learner group this algorithm cannot split, and buffer settings its loop kind cannot train on,
        naming the fields to change."""
        self._splits(config)
        self._core(config)
        loop_of(self.loop).check(config)

    def _core(self, config: RunConfig) -> None:
        """A recurrent core needs a learner that unrolls it over sequences, and collectors that carry one state
        per env through every step; a learner that unrolls one needs it."""
        if config.algo.net.core is None:
            if self.recurrent:
                raise ValueError(f"{self.name} trains a recurrent core: set algo.net.core, e.g. {{kind: lstm, hidden: "
                                 f"128}} (or use an algorithm for memoryless policies)")
            return
        if not self.recurrent:
            from rlfleet.shared.algorithms import REGISTRY  # the registry imports this module: resolved at call time

            able = sorted(name for name, spec in REGISTRY.items() if spec.recurrent)
            raise ValueError(f"{self.name} cannot train a recurrent core (algo.net.core): use "
                             f"{' or '.join(able) or 'an algorithm that can'}, or leave algo.net.core out")
        if config.collector.double_buffer:
            raise ValueError("collector.double_buffer acts for half of the envs ahead of the other half, which a "
                             "recurrent core's per-env state does not follow: leave collector.double_buffer off "
                             "with algo.net.core")
