"""Observation and action spaces as plain, torch-free models: what the coordinator hands every worker.

The coordinator derives them once from the environment (shared/envs/gymspaces.py, in a child process), so
collectors, the learner and the evaluator agree on shapes and dtypes without each probing the env, and the
chunk schema and policy manifest are both derived from them. Dict observations of flat boxes are flattened
(shared/envs/build.py applies the same flattening wherever an env is built); images (uint8, HxWxC or CxHxW) stay
uint8 all the way to the learner. Boolean and integer observations arrive already cast by the env builder (uint8
where their bounds fit 0..255, float32 otherwise), so these are the only two dtypes.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from rlfleet.shared.config.base import Strict

IMAGE_CHANNELS = (1, 3, 4)


class ObsSpace(Strict):
    shape: tuple[int, ...]
    """Observation shape (Dict observations flattened)."""
    dtype: Literal["float32", "uint8"]
    """Float32, or uint8 for images."""
    image_max: Annotated[int, Field(ge=1, le=255, description=(
        "the largest value an image's pixels take (the space's upper bound): the CNN divides by it, so camera "
        "frames (255) and boolean or 0/1 images such as MinAtar's (1) both reach it in [0, 1]"))] = 255

    @model_serializer(mode="wrap")
    def _without_default_image_max(self, handler: SerializerFunctionWrapHandler) -> Any:
        """255 is left out: every space described before 0/1 images existed serialises as it did, so the policy
        manifests of equal weights (and their files) stay byte-identical to those published before."""
        data = handler(self)
        if data.get("image_max") == 255:
            del data["image_max"]
        return data

    @property
    def image(self) -> bool:
        """uint8 with three dimensions: an image, encoded by a CNN."""
        return self.dtype == "uint8" and len(self.shape) == 3

    @property
    def channels_last(self) -> bool:
        return self.image and self.shape[-1] in IMAGE_CHANNELS

    @property
    def flat_size(self) -> int:
        return math.prod(self.shape)


class DiscreteActions(Strict):
    kind: Literal["discrete"] = "discrete"
    """Action space kind."""
    n: Annotated[int, Field(ge=1)]
    """Number of actions (0..n-1)."""


class MultiDiscreteActions(Strict):
    kind: Literal["multidiscrete"] = "multidiscrete"
    """Action space kind."""
    nvec: tuple[Annotated[int, Field(ge=1)], ...]
    """Number of choices per sub-action."""


class BoxActions(Strict):
    """Continuous actions; policies act in their own units and are clipped or squashed into [low, high]."""

    kind: Literal["box"] = "box"
    """Action space kind."""
    low: tuple[float, ...]
    """Lower bound per action dimension."""
    high: tuple[float, ...]
    """Upper bound per action dimension."""

    @property
    def dim(self) -> int:
        return len(self.low)


ActionSpace = Annotated[DiscreteActions | MultiDiscreteActions | BoxActions, Field(discriminator="kind")]


class Spaces(Strict):
    obs: ObsSpace
    """The observation space."""
    action: ActionSpace
    """The action space."""
    action_mask_offset: Annotated[int, Field(ge=0)] | None = Field(None, description=(
        "where the legal-action mask begins in the flat observation: n entries, 1 for a legal action (an env's "
        "Dict observation with an `action_mask` key, as PettingZoo's classic games give); every actor and learner "
        "then acts and bootstraps over legal actions only. Null: every action is always legal"))

    @model_validator(mode="after")
    def _mask_fits(self) -> Spaces:
        if self.action_mask_offset is None:
            return self
        if not isinstance(self.action, DiscreteActions):
            raise ValueError(f"an action mask needs Discrete actions, not {self.action.kind}")
        if len(self.obs.shape) != 1 or self.obs.dtype != "float32":
            raise ValueError(f"an action mask lives in a flat float observation, not {self.obs.dtype} "
                             f"{self.obs.shape}")
        if self.action_mask_offset + self.action.n > self.obs.shape[0]:
            raise ValueError(f"an action mask of {self.action.n} entries at {self.action_mask_offset} does not fit "
                             f"the observation's {self.obs.shape[0]}")
        return self

    @property
    def mask_slice(self) -> slice | None:
        """The mask's columns in the flat observation, or None."""
        if self.action_mask_offset is None:
            return None
        assert isinstance(self.action, DiscreteActions)
        return slice(self.action_mask_offset, self.action_mask_offset + self.action.n)
