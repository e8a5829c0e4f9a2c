"""Observation and action spaces as plain, torch-free models: what the coordinator hands every worker.

The coordinator derives them once from the environment (shared/envs/gymspaces.py, in a child process), so
collectors, the learner and the evaluator agree on shapes and dtypes without each probing the env, and the
chunk schema and policy manifest are both derived from them. Images (uint8, HxWxC or CxHxW) stay uint8 all the
way to the learner. Boolean and integer Box observations arrive already cast by the env builder (uint8 images where
their bounds fit 0..255, float32 otherwise).

Every other observation space (Discrete, MultiDiscrete, MultiBinary, and Dict or Tuple of any of them, of flat
Boxes and of images) reaches rlfleet flattened into one vector of raw values, its leaves in order
(shared/envs/gymspaces.py): a Discrete as its one integer, a MultiDiscrete as its integers, a MultiBinary as its 0/1
values, a Box as its values, an image as its pixels. `ObsSpace.parts` lists those leaves, so chunks store the
integers compactly and the policy's input encoding (one-hot for Discrete and MultiDiscrete, 0/1 floats for
MultiBinary, as Stable-Baselines3's `preprocess_obs`; a CNN per image, as its MultiInputPolicy;
shared/policy/obs_encoding.py) is part of the manifest, reproducible by any reader. A Dict or Tuple of Boxes alone
needs no encoding: it is one float32 vector without parts, as it always was.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from rlfleet.shared.config.base import Strict

IMAGE_CHANNELS = (1, 3, 4)
# The integer dtypes of observations made of integer parts, smallest first: chunks store each such observation in
# the first that holds every value its parts allow (shared/envs/gymspaces.py `raw_dtype`).
INTEGER_DTYPES = ("uint8", "int8", "int16", "int32", "int64")
ObsDtype = Literal["float32", "uint8", "int8", "int16", "int32", "int64"]


class BoxPart(Strict):
    """`size` float values, fed to the network as they are (normalised by the manifest's obs_norm, if any)."""

    kind: Literal["box"] = "box"
    """Part kind."""
    size: Annotated[int, Field(ge=1)]
    """Values (columns) of the part."""


class DiscretePart(Strict):
    """One integer in [start, start + n), fed to the network one-hot: n values, 1 at x - start."""

    kind: Literal["discrete"] = "discrete"
    """Part kind."""
    n: Annotated[int, Field(ge=1)]
    """Number of values."""
    start: int = 0
    """The smallest value."""


class MultiDiscretePart(Strict):
    """len(nvec) integers, the k-th in [start[k], start[k] + nvec[k]), fed to the network as the concatenation of
    their one-hots (sum(nvec) values)."""

    kind: Literal["multidiscrete"] = "multidiscrete"
    """Part kind."""
    nvec: tuple[Annotated[int, Field(ge=1)], ...] = Field(min_length=1)
    """Number of values of each integer (a multi-dimensional MultiDiscrete's, flattened in C order)."""
    start: tuple[int, ...]
    """The smallest value of each integer."""

    @model_validator(mode="after")
    def _start_per_value(self) -> MultiDiscretePart:
        if len(self.start) != len(self.nvec):
            raise ValueError(f"a multidiscrete part has {len(self.nvec)} integers but {len(self.start)} starts")
        return self


class MultiBinaryPart(Strict):
    """`size` values of 0 or 1, fed to the network as 0.0 / 1.0 (never normalised)."""

    kind: Literal["multibinary"] = "multibinary"
    """Part kind."""
    size: Annotated[int, Field(ge=1)]
    """Values (columns) of the part."""


class ImagePart(Strict):
    """An image inside a Dict or Tuple observation (a uint8 Box of three dimensions, 1, 3 or 4 channels first or
    last): its pixels in C order, integers 0..image_max, read by a convolutional encoder of its own (the policy's
    `encoder` kind, one per image part) whose features join the other parts' encodings, as Stable-Baselines3's
    MultiInputPolicy reads an image key. Never fed to the MLP directly, never normalised."""

    kind: Literal["image"] = "image"
    """Part kind."""
    shape: tuple[Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)]]
    """The image's shape as the env gives it: height, width, channels or channels, height, width."""
    image_max: Annotated[int, Field(ge=1, le=255)] = 255
    """The largest value its pixels take (the space's upper bound): the encoder divides by it."""

    @model_validator(mode="after")
    def _channels(self) -> ImagePart:
        if self.shape[-1] not in IMAGE_CHANNELS and self.shape[0] not in IMAGE_CHANNELS:
            raise ValueError(f"an image part of shape {list(self.shape)} has no 1, 3 or 4 channels first or last")
        return self

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def channels_last(self) -> bool:
        return self.shape[-1] in IMAGE_CHANNELS


PartModel = BoxPart | DiscretePart | MultiDiscretePart | MultiBinaryPart | ImagePart
ObsPart = Annotated[PartModel, Field(discriminator="kind")]


def image_dims(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(channels, height, width) of an image of this shape, whichever way round the env gives it (channels last
    where the last dimension can be a channel count, as in gymnasium's and ALE's frames)."""
    if shape[-1] in IMAGE_CHANNELS:
        height, width, channels = shape
    else:
        channels, height, width = shape
    return channels, height, width


def raw_width(part: PartModel) -> int:
    """Columns the part takes in the stored (raw) observation."""
    if isinstance(part, DiscretePart):
        return 1
    if isinstance(part, MultiDiscretePart):
        return len(part.nvec)
    return part.size


def encoded_width(part: PartModel) -> int:
    """Values the part gives the network once encoded: none for an image, which its own encoder reads."""
    if isinstance(part, DiscretePart):
        return part.n
    if isinstance(part, MultiDiscretePart):
        return sum(part.nvec)
    if isinstance(part, ImagePart):
        return 0
    return part.size


def integer_columns(parts: tuple[ObsPart, ...]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(raw columns, their lowest values, their highest values) of the integer parts' values: what a chunk's
    observations must hold on those columns (a one-hot of anything else does not exist)."""
    columns: list[int] = []
    low: list[int] = []
    high: list[int] = []
    at = 0
    for part in parts:
        if isinstance(part, DiscretePart):
            columns.append(at)
            low.append(part.start)
            high.append(part.start + part.n - 1)
        elif isinstance(part, MultiDiscretePart):
            columns += range(at, at + len(part.nvec))
            low += part.start
            high += (start + n - 1 for start, n in zip(part.start, part.nvec, strict=True))
        elif isinstance(part, MultiBinaryPart | ImagePart):
            columns += range(at, at + part.size)
            low += [0] * part.size
            high += [1 if isinstance(part, MultiBinaryPart) else part.image_max] * part.size
        at += raw_width(part)
    return tuple(columns), tuple(low), tuple(high)


class ObsSpace(Strict):
    shape: tuple[int, ...]
    """Observation shape (observations with `parts`: one flat vector of their raw values)."""
    dtype: ObsDtype
    """Float32; uint8 for images; an integer dtype for observations made only of integer parts."""
    image_max: Annotated[int, Field(ge=1, le=255, description=(
        "the largest value an image's pixels take (the space's upper bound): the CNN divides by it, so camera "
        "frames (255) and boolean or 0/1 images such as MinAtar's (1) both reach it in [0, 1]"))] = 255

    parts: tuple[ObsPart, ...] | None = Field(None, min_length=1, description=(
        "the leaves of a Discrete, MultiDiscrete, MultiBinary, Dict or Tuple observation in order (Dict keys "
        "sorted, Tuple positions, nested ones depth first): the observation is their raw values side by side "
        "(shape [sum of raw widths]; an image's pixels in C order) and the network reads each encoded, an image "
        "by a convolutional encoder of its own (docs/protocol.md). Null: a Box (or a Dict or Tuple of Boxes "
        "alone, flattened), read as it is"))

    @model_validator(mode="after")
    def _parts_fit(self) -> ObsSpace:
        if self.parts is None:
            return self
        width = sum(raw_width(part) for part in self.parts)
        if self.shape != (width,):
            raise ValueError(f"an observation of parts is one flat vector of their {width} raw values, not "
                             f"{list(self.shape)}")
        boxes = any(isinstance(part, BoxPart) for part in self.parts)
        if boxes != (self.dtype == "float32"):
            raise ValueError(f"an observation of parts is float32 where a part is a box, an integer dtype otherwise, "
                             f"not {self.dtype}")
        return self

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The default image_max (255) and absent parts are left out: every space described before 0/1 images and
        encoded parts existed serialises as it did, so the policy manifests of equal weights (and their files)
        stay byte-identical to those published before."""
        data = handler(self)
        if data.get("image_max") == 255:
            del data["image_max"]
        if data.get("parts", 0) is None:
            del data["parts"]
        return data

    @property
    def image(self) -> bool:
        """uint8 with three dimensions: an image, encoded by a CNN."""
        return self.dtype == "uint8" and len(self.shape) == 3

    @property
    def channels_last(self) -> bool:
        return self.image and self.shape[-1] in IMAGE_CHANNELS

    @property
    def image_parts(self) -> tuple[tuple[int, ImagePart], ...]:
        """(first raw column, part) of each image inside a Dict or Tuple observation, in order: the inputs of a
        multi-input encoder (a CNN per image, the other parts encoded beside them)."""
        found, at = [], 0
        for part in self.parts or ():
            if isinstance(part, ImagePart):
                found.append((at, part))
            at += raw_width(part)
        return tuple(found)

    @property
    def flat_size(self) -> int:
        """Values of one stored observation."""
        return math.prod(self.shape)

    @property
    def encoded_size(self) -> int:
        """Values the network reads for one observation (an MLP's input width): flat_size without parts."""
        return self.flat_size if self.parts is None else sum(encoded_width(part) for part in self.parts)

    @property
    def norm_shape(self) -> tuple[int, ...]:
        """The shape obs_norm's statistics cover: the observation's without parts, its box parts' values (side by
        side, in order) otherwise: one-hot and binary parts are never normalised."""
        if self.parts is None:
            return self.shape
        return (sum(part.size for part in self.parts if isinstance(part, BoxPart)),)


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
        if len(self.obs.shape) != 1:
            raise ValueError(f"an action mask lives in a flat observation, not {self.obs.dtype} {self.obs.shape}")
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
