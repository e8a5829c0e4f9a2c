"""The policy manifest: everything needed to act with a published policy file, and nothing else.

A policy version is a safetensors file of weights whose metadata key `rlfleet.manifest` holds this model as
sorted-key JSON. Collectors and the evaluator build their actor from the manifest alone (shared/policy/actors.py),
so a policy file says what it is: the spaces, the encoder, the action head and the observation
normalisation its learner trained with. Nothing time- or run-specific goes in, so two runs that train the
same weights publish byte-identical files.

Action heads (outputs of the network's last layer):
* q_values: one value per action; greedy is argmax, exploration epsilon-greedy.
* categorical / multi_categorical: logits (per sub-action, concatenated); actions are drawn from softmax.
* gaussian: the mean of a normal with a state-independent `log_std` parameter; actions are clipped into the
  Box bounds when applied to the env (the drawn action is what the learner scores).
* gaussian_sde: generalized state-dependent exploration (Raffin et al. 2022, SB3's `use_sde`): the mean, and a
  `log_std` [width, dim] parameter over the last hidden layer's `width` features (the latent); exploring draws
  mean + latent @ (exp(log_std) * W) with unit normal weights W that an actor keeps for several steps, so its noise
  is a smooth function of the state. Each action's density is that of N(mean, sqrt(latent^2 @ exp(log_std)^2)).
  The network's output is the mean followed by the latent.
* tanh_gaussian: mean and log-std; a = tanh(u), u ~ N(mean, std), rescaled from [-1, 1] into the bounds.

An optional recurrent `core` (GRU or LSTM) sits between the encoder and `net`, where sb3-contrib's RecurrentPPO puts
its LSTM; actors then carry one state per env (shared/policy/actors.py). A manifest without one serialises without
the key, so the files of memoryless policies stay byte-identical.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import Field, field_validator

from rlfleet.shared.config.base import (
    CnnEncoder,
    CoreConfig,
    Encoder,
    EpsilonSchedule,
    ImpalaEncoder,
    MlpConfig,
    MlpEncoder,
    NatureEncoder,
    NetConfig,
    Strict,
)
from rlfleet.shared.payloads.spaces import ObsSpace, Spaces
from rlfleet.shared.payloads.spaces import image_dims as dims_of

MANIFEST_KEY = "rlfleet.manifest"
MANIFEST_FORMAT: Literal["rlfleet.policy"] = "rlfleet.policy"
MANIFEST_VERSION = 1
Head = Literal["q_values", "categorical", "multi_categorical", "gaussian", "gaussian_sde", "tanh_gaussian"]


class ManifestError(ValueError):
    """A policy file without a readable manifest, or one of another format version."""


class ObsNorm(Strict):
    """Frozen running statistics: actors feed clip((obs - mean) / sqrt(var + 1e-8), -clip, clip)."""

    mean: tuple[float, ...]
    """Mean return over the episodes."""
    var: tuple[float, ...]
    clip: float = 10.0


class PolicyManifest(Strict):
    format: Literal["rlfleet.policy"] = MANIFEST_FORMAT
    version: int = MANIFEST_VERSION
    spaces: Spaces
    """The env's observation and action spaces as the coordinator derived them."""
    encoder: Encoder = MlpEncoder()
    net: MlpConfig
    """The policy network's hidden layers and activation (the encoder before them is `encoder`)."""
    head: Head
    obs_norm: ObsNorm | None = None
    core: CoreConfig | None = None
    """The recurrent core between the encoder and `net`, if any (absent from the JSON of a policy without one, so
    such files are byte-identical to those written before cores existed)."""

    @field_validator("net", mode="before")
    @classmethod
    def _mlp_part(cls, value: object) -> object:
        """A run's NetConfig also says which encoder and trunk it wants; the manifest records the encoder it got
        in `encoder`, and the trunk is the learner's business, so `net` keeps only the MLP (files of MLP policies
        stay as they were before encoders were configurable)."""
        return value.mlp if isinstance(value, NetConfig) else value

    @classmethod
    def of(cls, spaces: Spaces, net: NetConfig, head: Head) -> PolicyManifest:
        """The manifest of a policy a learner builds from its `algo.net`: the configured encoder, or the default
        for the observation (`encoder_for`)."""
        return cls(spaces=spaces, encoder=encoder_for(net, spaces.obs), net=net.mlp, head=head, core=net.core)

    def to_json(self) -> str:
        raw = self.model_dump(mode="json")
        if raw["core"] is None:
            del raw["core"]
        return json.dumps(raw, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> PolicyManifest:
        if text is None:
            raise ManifestError(f"policy file has no {MANIFEST_KEY!r} metadata")
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise ManifestError(f"policy manifest is not JSON: {exc}") from exc
        if not isinstance(raw, dict) or raw.get("format") != MANIFEST_FORMAT:
            raise ManifestError(f"not an {MANIFEST_FORMAT} manifest")
        if raw.get("version") != MANIFEST_VERSION:
            raise ManifestError(f"policy manifest version {raw.get('version')!r}; this rlfleet reads version "
                                f"{MANIFEST_VERSION}")
        try:
            return cls.model_validate(raw)
        except ValueError as exc:
            raise ManifestError(f"invalid policy manifest: {exc}") from exc


class Behaviour(Strict):
    """How collectors act for an algorithm, declared by its registry entry and handed out in the task."""

    head: Head
    """The policy's action head (shared/policy/manifest.py)."""
    sample: bool = Field(description="draw actions from the policy's distribution and record their log-prob")
    epsilon: EpsilonSchedule | None = Field(None, description="epsilon-greedy on q_values")
    random_env_steps: Annotated[int, Field(ge=0, description=(
        "uniform random actions until the run has this many env steps (warm-up of off-policy learners)"))] = 0
    core: CoreConfig | None = Field(None, description=(
        "the policy's recurrent core (algo.net.core): collectors carry one state per env and store each env's state "
        "at a chunk's first row in the chunk's `core_state` column"))
    sde_sample_freq: Annotated[int | None, Field(ge=1, description=(
        "gaussian_sde heads: the steps each env keeps its exploration weights before new ones are drawn "
        "(algo.sde_sample_freq)"))] = None


def default_encoder(obs: ObsSpace) -> MlpEncoder | CnnEncoder:
    """Images (alone or inside a Dict or Tuple) get the small CNN, everything else is flattened into the MLP (the
    choice when `algo.net.encoder` is null; policy files from before encoders were configurable were built this
    way)."""
    return CnnEncoder() if obs.image or obs.image_parts else MlpEncoder()


def encoder_for(net: NetConfig, obs: ObsSpace) -> Encoder:
    """The encoder `algo.net.encoder` asks for, or the default for this observation."""
    return net.encoder if net.encoder is not None else default_encoder(obs)


NATURE_MIN_SIZE = 36  # 8x8/4 -> 4x4/2 -> 3x3/1 leaves one pixel of a 36x36 frame


def image_dims(obs: ObsSpace) -> tuple[int, int, int]:
    """(channels, height, width) of an image observation, whichever way round the env gives it."""
    return dims_of(obs.shape)


def _nature_side(size: int) -> int:
    """Height (or width) left after the Nature CNN's three unpadded convolutions; <= 0: nothing is left."""
    for kernel, stride in ((8, 4), (4, 2), (3, 1)):
        if size < kernel:
            return 0
        size = (size - kernel) // stride + 1
    return size


def encoder_features(encoder: Encoder, obs: ObsSpace) -> int:
    """How many features `encoder` gives the MLP for one observation; ValueError naming `algo.net.encoder` and
    what fits when it cannot read this observation. With image parts (a Dict or Tuple holding images), a CNN of the
    encoder's kind reads each image and the other parts' encodings follow."""
    if obs.image_parts:
        if isinstance(encoder, MlpEncoder):
            raise ValueError("algo.net.encoder: this env's Dict or Tuple observation holds images, which an mlp "
                             "encoder cannot read: use {kind: cnn}, {kind: nature} or {kind: impala} (a CNN per "
                             "image, the other entries encoded beside them), or leave algo.net.encoder out")
        return sum(image_features(encoder, part.shape) for _, part in obs.image_parts) + obs.encoded_size
    if isinstance(encoder, MlpEncoder):
        return obs.encoded_size  # images too: flattened, as they are
    if not obs.image:
        raise ValueError(f"algo.net.encoder: the {encoder.kind} encoder reads images (uint8, three dimensions), "
                         f"this env observes {obs.dtype}{list(obs.shape)}: use {{kind: mlp}} or leave "
                         "algo.net.encoder out")
    return image_features(encoder, obs.shape)


def image_features(encoder: CnnEncoder | NatureEncoder | ImpalaEncoder, shape: tuple[int, ...]) -> int:
    """Features a convolutional encoder gives for one image of this shape; ValueError when it leaves nothing."""
    _, height, width = dims_of(shape)
    if isinstance(encoder, NatureEncoder):
        side_h, side_w = _nature_side(height), _nature_side(width)
        if side_h < 1 or side_w < 1:
            raise ValueError(f"algo.net.encoder: the nature encoder needs frames of at least {NATURE_MIN_SIZE}x"
                             f"{NATURE_MIN_SIZE} (its 8x8 stride-4, 4x4 stride-2 and 3x3 convolutions leave nothing "
                             f"of {height}x{width}): use {{kind: impala}} or {{kind: cnn}}, which fit any frame size")
        return 64 * side_h * side_w
    halvings = len(encoder.channels)  # cnn: a 3x3 stride-2 padded convolution; impala: a padded 3x3/2 max pool
    for _ in range(halvings):
        height, width = -(-height // 2), -(-width // 2)
    return encoder.channels[-1] * height * width
