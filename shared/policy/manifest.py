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
* tanh_gaussian: mean and log-std; a = tanh(u), u ~ N(mean, std), rescaled from [-1, 1] into the bounds.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import Field

from shared.config.base import EpsilonSchedule, NetConfig, Strict
from shared.payloads.spaces import ObsSpace, Spaces

MANIFEST_KEY = "rlfleet.manifest"
MANIFEST_FORMAT: Literal["rlfleet.policy"] = "rlfleet.policy"
MANIFEST_VERSION = 1
Head = Literal["q_values", "categorical", "multi_categorical", "gaussian", "tanh_gaussian"]


class ManifestError(ValueError):
    """A policy file without a readable manifest, or one of another format version."""


class MlpEncoder(Strict):
    kind: Literal["mlp"] = "mlp"


class CnnEncoder(Strict):
    """Image observations: strided 3x3 convolutions (each halves height and width), flattened, then the MLP."""

    kind: Literal["cnn"] = "cnn"
    channels: tuple[Annotated[int, Field(ge=1, le=512)], ...] = (16, 32)


Encoder = Annotated[MlpEncoder | CnnEncoder, Field(discriminator="kind")]


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
    net: NetConfig
    """The policy network's hidden layers and activation."""
    head: Head
    obs_norm: ObsNorm | None = None

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

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


def default_encoder(obs: ObsSpace) -> MlpEncoder | CnnEncoder:
    """Images get the CNN, everything else is flattened into the MLP."""
    return CnnEncoder() if obs.image else MlpEncoder()
