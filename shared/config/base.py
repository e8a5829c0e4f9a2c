"""Config building blocks shared by the run config and every algorithm's hyperparameter model.

They live apart from shared/config/run_config.py because the run config is assembled from the algorithm registry, and
the registry's models are built from these: one direction of imports, no cycle.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlfleet.shared import FIELD_DOCS


class Strict(BaseModel):
    """Unknown keys, NaN and inf are refused; a loaded config never changes afterwards."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True, use_attribute_docstrings=FIELD_DOCS)


class MlpEncoder(Strict):
    """Observations flattened (and normalised with the manifest's statistics, if any) straight into the MLP."""

    kind: Literal["mlp"] = "mlp"
    """The encoder's kind in `algo.net.encoder`."""


class CnnEncoder(Strict):
    """rlfleet's small image encoder: strided 3x3 convolutions (each halves height and width), flattened. Cheap
    for small frames; on 84x84 its many features make the MLP's first layer large (the Nature CNN is smaller)."""

    kind: Literal["cnn"] = "cnn"
    """The encoder's kind in `algo.net.encoder`."""
    channels: tuple[Annotated[int, Field(ge=1, le=512)], ...] = (16, 32)
    """Output channels of each 3x3 stride-2 convolution."""


class NatureEncoder(Strict):
    """The encoder of Mnih et al. 2015 (Nature): convolutions 32x8x8 stride 4, 64x4x4 stride 2, 64x3x3 stride 1,
    ReLU after each, flattened; its 512-unit layer is the MLP's `net.hidden: [512]`. Needs frames of 36x36 or
    more (84x84: 3,136 features)."""

    kind: Literal["nature"] = "nature"
    """The encoder's kind in `algo.net.encoder`."""


class ImpalaEncoder(Strict):
    """The IMPALA paper's ResNet (Espeholt et al. 2018): per stage a 3x3 convolution, a 3x3 stride-2 max pool and
    two residual blocks; ReLU and flatten after the last stage. Each stage halves height and width (rounding up),
    so any frame size fits."""

    kind: Literal["impala"] = "impala"
    """The encoder's kind in `algo.net.encoder`."""
    channels: tuple[Annotated[int, Field(ge=1, le=512)], ...] = Field((16, 32, 32), min_length=1)
    """Output channels of each stage."""


Encoder = Annotated[MlpEncoder | CnnEncoder | NatureEncoder | ImpalaEncoder, Field(discriminator="kind")]
Trunk = Literal["shared", "separate", "separate_core"]


class CoreConfig(Strict):
    """A recurrent core: one GRU or LSTM layer between the encoder and the MLP, as sb3-contrib's RecurrentPPO places
    its LSTM (after the features extractor, before the MLP of each head). Its equations and weights are torch's
    nn.GRU / nn.LSTM (shared/policy/recurrent.py runs them in numpy)."""

    kind: Literal["gru", "lstm"]
    """The cell: `gru` (state: h) or `lstm` (state: h and c)."""
    hidden: Annotated[int, Field(ge=1, le=4096)] = 128
    """Width of the core's state and output (the MLP's input)."""

    @property
    def state_shape(self) -> tuple[int, ...]:
        """One env's state: [hidden] for a GRU, [2, hidden] (h then c) for an LSTM."""
        return (self.hidden,) if self.kind == "gru" else (2, self.hidden)


class MlpConfig(Strict):
    """The fully connected part of a network: what a policy manifest records as its `net`."""

    hidden: tuple[int, ...] = Field((256, 256), description="hidden layer widths")
    activation: Literal["relu", "tanh"] = "relu"
    """Activation between hidden layers."""


class NetConfig(MlpConfig):
    """The policy network every service builds: a published state dict loads into any of them."""

    encoder: Encoder | None = None
    """What reads the observation before the MLP: `{kind: mlp}`, `{kind: cnn}`, `{kind: nature}` or
    `{kind: impala, channels: [16, 32, 32]}`. Null: the small CNN for uint8 images, the MLP for everything else."""
    trunk: Trunk | None = None
    """Algorithms with an actor and a critic: `shared` trains one encoder and hidden layers under a policy head
    and a value head (as Stable-Baselines3 and CleanRL do for Atari: half the compute), `separate` gives the critic
    its own copy of the network (with a `core`: an MLP of its own reading the actor's core, detached),
    `separate_core` (with a `core` only) gives the critic a core of its own as well, trained by the value loss alone
    (sb3-contrib RecurrentPPO's default, `enable_critic_lstm`). Null: shared for image encoders, separate for the
    MLP."""
    core: CoreConfig | None = None
    """A recurrent core between the encoder and the MLP: `{kind: gru, hidden: 128}` or `{kind: lstm, hidden: 128}`.
    Null: no core, a memoryless policy. Only algorithms that train from sequences take one."""
    init: Literal["torch", "orthogonal"] = "torch"
    """Algorithms with an actor and a critic: how their linear and convolutional layers start. `torch`: torch's
    defaults. `orthogonal`: orthogonal weights and zero biases, gain sqrt(2) for hidden layers, 0.01 for the policy
    head (initial actions near the middle of their range, at almost equal probabilities) and 1 for the value head,
    as Stable-Baselines3 (`ortho_init`) and CleanRL start their actor-critics. Cores keep torch's initialisation,
    as sb3-contrib's. The learner's choice alone: a policy file does not record it."""

    @property
    def mlp(self) -> MlpConfig:
        """The hidden layers and activation alone, as a manifest records them (its encoder is a field of its own)."""
        return MlpConfig(hidden=self.hidden, activation=self.activation)


class EpsilonSchedule(Strict):
    start: Annotated[float, Field(ge=0, le=1)] = 1.0
    """Epsilon at 0 env steps."""
    end: Annotated[float, Field(ge=0, le=1)] = 0.04
    """Epsilon after decay_env_steps."""
    decay_env_steps: Annotated[int, Field(ge=1, description="global env steps over which epsilon decays")] = 10_000

    def value(self, env_steps: int) -> float:
        """Linear decay on the run's global env-step count, so adding collectors does not slow the schedule."""
        frac = min(1.0, max(0, env_steps) / self.decay_env_steps)
        return self.start + frac * (self.end - self.start)
