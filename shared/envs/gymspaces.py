"""From gymnasium's spaces to rlfleet's (shared/payloads/spaces.py), refusing what rlfleet cannot train.

Kept apart from shared/payloads/spaces.py so that the models can be imported without gymnasium (the coordinator).
Observations that are not a Box reach every actor and chunk as one flat vector of raw values (`RawObservation`,
the outermost observation wrapper shared/envs/build.py applies): its layout is `ObsSpace.parts`, and the encoding
the network reads is the policy's business (shared/policy/obs_encoding.py), so chunks never hold a one-hot.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np

from rlfleet.shared.payloads.spaces import (
    IMAGE_CHANNELS,
    INTEGER_DTYPES,
    BoxActions,
    BoxPart,
    DiscreteActions,
    DiscretePart,
    ImagePart,
    MultiBinaryPart,
    MultiDiscreteActions,
    MultiDiscretePart,
    ObsDtype,
    ObsPart,
    ObsSpace,
    Spaces,
    raw_width,
)

MASK_KEY = "action_mask"
SUPPORTED = "Box, Discrete, MultiDiscrete, MultiBinary, or a Dict or Tuple of them"


def describe(env: gym.Env | gym.vector.VectorEnv) -> Spaces:
    """The spaces of an env (or of one env of a vector env); raises ValueError for spaces rlfleet cannot train."""
    act_space = getattr(env, "single_action_space", env.action_space)
    action = _action(act_space)
    raw = _raw_wrapper(env)
    if raw is None:
        obs, mask = _obs(getattr(env, "single_observation_space", env.observation_space)), None
    else:
        obs, mask = raw.described, raw.mask
    if mask is not None and not (isinstance(action, DiscreteActions) and mask[1] == action.n):
        raise ValueError(f"the observation's action_mask has {mask[1]} entries for action space {act_space}: a mask "
                         f"needs Discrete actions, one entry per action")
    return Spaces(obs=obs, action=action, action_mask_offset=None if mask is None else mask[0])


class ObservationOutOfRange(ValueError):
    """An integer observation outside its space (a Discrete(4) observation of 7): an env error, never trained on."""


class RawObservation(gym.ObservationWrapper):
    """A Discrete, MultiDiscrete, MultiBinary, Dict or Tuple observation as one flat vector of its leaves' raw
    values (`ObsSpace.parts`, in the order gymnasium's flatten uses: Dict keys sorted, Tuple positions, depth
    first), in the smallest integer dtype that holds them, or float32 where a leaf is a Box.

    Integer values are checked against their space here, before the cast that would wrap them: a value outside
    it raises ObservationOutOfRange, which ResetOnError counts as an env error (the env is reset, the step never
    trained on) instead of a wrong one-hot, or an index error, in an actor or the learner."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        found = list(leaves(env.observation_space, ""))
        for path, leaf in found:
            _check_leaf(path, leaf)
        parts = [_part(leaf) for _, leaf in found]
        bounds = [_bounds(leaf, part) for (_, leaf), part in zip(found, parts, strict=True)]
        # Per leaf: its path, space, part, first raw column and, for integer parts, the bounds its values are held to.
        self._leaves: list[tuple[str, gym.Space, ObsPart, int, np.ndarray | None]] = []
        at = 0
        for (path, leaf), part, bound in zip(found, parts, bounds, strict=True):
            self._leaves.append((path, leaf, part, at, None if isinstance(part, BoxPart) else bound.astype(np.int64)))
            at += raw_width(part)
        boxes = [isinstance(part, BoxPart) for part in parts]
        dtype = "float32" if any(boxes) else raw_dtype(parts)
        self.described = ObsSpace(shape=(at,), dtype=dtype, parts=None if all(boxes) else tuple(parts))
        self.mask = _mask(env.observation_space, parts, [path for path, _ in found])
        self._dtype = np.dtype(dtype)
        low, high = np.concatenate(bounds, axis=1)
        self.observation_space = gym.spaces.Box(low.astype(self._dtype), high.astype(self._dtype), (at,),
                                                self._dtype)  # type: ignore[arg-type]

    def observation(self, observation: Any) -> np.ndarray:
        out = np.empty(self.described.shape, self._dtype)
        for value, (path, leaf, part, at, bound) in zip(_values(self.env.observation_space, observation),
                                                        self._leaves, strict=True):
            out[at:at + raw_width(part)] = _raw(path, leaf, part, bound, value)
        return out


def raw_dtype(parts: list[ObsPart]) -> ObsDtype:
    """The smallest of INTEGER_DTYPES that holds every value of these integer parts."""
    low, high = 0, 1
    for part in parts:
        if isinstance(part, DiscretePart):
            low, high = min(low, part.start), max(high, part.start + part.n - 1)
        elif isinstance(part, MultiDiscretePart):
            low = min(low, *part.start)
            high = max(high, *(s + n - 1 for s, n in zip(part.start, part.nvec, strict=True)))
        elif isinstance(part, ImagePart):
            high = max(high, part.image_max)
    for name in INTEGER_DTYPES:
        info = np.iinfo(name)
        if info.min <= low and high <= info.max:
            return name  # type: ignore[return-value]
    raise ValueError(f"integer observations between {low} and {high} do not fit int64")


def _raw_wrapper(env: gym.Env | gym.vector.VectorEnv) -> RawObservation | None:
    inner = env.envs[0] if isinstance(env, gym.vector.SyncVectorEnv) else env
    while isinstance(inner, gym.Wrapper):
        if isinstance(inner, RawObservation):
            return inner
        inner = inner.env
    return None


def leaves(space: gym.Space, path: str) -> Iterator[tuple[str, gym.Space]]:
    """(path, leaf space) of every leaf, in flattening order; a path names a Dict key or Tuple position."""
    if isinstance(space, gym.spaces.Dict):
        for key, sub in space.spaces.items():
            yield from leaves(sub, f"{path}.{key}" if path else str(key))
    elif isinstance(space, gym.spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            yield from leaves(sub, f"{path}.{i}" if path else str(i))
    else:
        yield path, space


def _values(space: gym.Space, obs: Any) -> Iterator[Any]:
    """The leaves' values of an observation of `space`, in `_leaves`' order."""
    if isinstance(space, gym.spaces.Dict):
        for key, sub in space.spaces.items():
            yield from _values(sub, obs[key])
    elif isinstance(space, gym.spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            yield from _values(sub, obs[i])
    else:
        yield obs


def _check_leaf(path: str, leaf: gym.Space) -> None:
    where = f"observation entry {path!r}" if path else "observation"
    if isinstance(leaf, gym.spaces.Box):
        if _is_image(leaf) and not (leaf.shape[-1] in IMAGE_CHANNELS or leaf.shape[0] in IMAGE_CHANNELS):
            raise ValueError(f"{where} is a uint8 image of shape {leaf.shape} without 1, 3 or 4 channels first or "
                             f"last: the convolutional encoder of a Dict or Tuple observation's image reads those")
        if not (np.issubdtype(leaf.dtype, np.floating) or np.issubdtype(leaf.dtype, np.integer)
                or leaf.dtype == np.bool_):
            raise ValueError(f"{where} has dtype {leaf.dtype}: use floats, integers or booleans")
    elif isinstance(leaf, gym.spaces.MultiDiscrete):
        if leaf.nvec.size == 0:
            raise ValueError(f"{where} is an empty MultiDiscrete")
    elif not isinstance(leaf, gym.spaces.Discrete | gym.spaces.MultiBinary):
        raise ValueError(f"{where} space {leaf} is not supported: use {SUPPORTED}")


def _is_image(leaf: gym.spaces.Box) -> bool:
    """A uint8 Box of three dimensions: an image, read by a CNN of its own inside a Dict or Tuple observation."""
    return len(leaf.shape) == 3 and leaf.dtype == np.uint8


def _part(leaf: gym.Space) -> ObsPart:
    if isinstance(leaf, gym.spaces.Box) and _is_image(leaf):
        return ImagePart(shape=tuple(int(d) for d in leaf.shape),  # type: ignore[arg-type]
                         image_max=max(1, int(np.max(leaf.high))))
    if isinstance(leaf, gym.spaces.Discrete):
        return DiscretePart(n=int(leaf.n), start=int(leaf.start))
    if isinstance(leaf, gym.spaces.MultiDiscrete):
        return MultiDiscretePart(nvec=tuple(int(n) for n in leaf.nvec.reshape(-1)),
                                 start=tuple(int(s) for s in np.broadcast_to(leaf.start, leaf.nvec.shape).reshape(-1)))
    if isinstance(leaf, gym.spaces.MultiBinary):
        return MultiBinaryPart(size=int(np.prod(leaf.shape or ())))
    return BoxPart(size=int(np.prod(leaf.shape or ())))


def _bounds(leaf: gym.Space, part: ObsPart) -> np.ndarray:
    """[2, raw width]: the lowest and highest raw value of each of the part's columns."""
    if isinstance(part, DiscretePart):
        return np.array([[part.start], [part.start + part.n - 1]], np.float64)
    if isinstance(part, MultiDiscretePart):
        start = np.asarray(part.start, np.float64)
        return np.stack([start, start + np.asarray(part.nvec) - 1])
    if isinstance(part, MultiBinaryPart):
        return np.stack([np.zeros(part.size), np.ones(part.size)])
    assert isinstance(leaf, gym.spaces.Box)
    return np.stack([np.asarray(leaf.low, np.float64).reshape(-1), np.asarray(leaf.high, np.float64).reshape(-1)])


def _raw(path: str, leaf: gym.Space, part: ObsPart, bound: np.ndarray | None, value: Any) -> np.ndarray:
    """One leaf's raw values, flat; ObservationOutOfRange for a wrong size or, where `bound` ([2, width]) is given,
    a value that is not an integer within it."""
    where = f"observation entry {path!r}" if path else "observation"
    raw = np.asarray(value).reshape(-1)
    if raw.size != raw_width(part):
        raise ObservationOutOfRange(f"{where} has {raw.size} values, its space {leaf} has {raw_width(part)}")
    if bound is None:
        return raw
    if raw.dtype.kind not in "iub":
        raise ObservationOutOfRange(f"{where} is {raw.dtype} {raw.tolist()[:8]}, not integers of {leaf}")
    if ((raw < bound[0]) | (raw > bound[1])).any():
        raise ObservationOutOfRange(f"{where} is {raw.tolist()[:8]}, outside its space {leaf}")
    return raw


def _mask(space: gym.Space, parts: list[ObsPart], paths: list[str]) -> tuple[int, int] | None:
    """(raw column offset, size) of a Dict observation's top-level `action_mask`, or None."""
    if not isinstance(space, gym.spaces.Dict) or MASK_KEY not in space.spaces:
        return None
    offset = 0
    for path, part in zip(paths, parts, strict=True):
        if path == MASK_KEY:
            shape = space.spaces[MASK_KEY].shape
            if isinstance(part, BoxPart | MultiBinaryPart) and shape is not None and len(shape) == 1:
                return offset, part.size
            break
        offset += raw_width(part)
    raise ValueError(f"the observation's action_mask is {space.spaces[MASK_KEY]}: a mask is one flat Box or "
                     f"MultiBinary of 0/1, one entry per action (a wrapper such as frame_stack must not stack it)")


def _obs(space: gym.Space) -> ObsSpace:
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"observation space {space} is not supported: use {SUPPORTED} (an env built by "
                         f"rlfleet.shared.envs.build.make_env gives those as one flat vector)")
    if space.dtype == np.uint8:
        if len(space.shape) == 3 and not (space.shape[-1] in IMAGE_CHANNELS or space.shape[0] in IMAGE_CHANNELS):
            raise ValueError(f"uint8 observation of shape {space.shape} is not an image with 1, 3 or 4 channels "
                             f"first or last")
        return ObsSpace(shape=tuple(int(d) for d in space.shape), dtype="uint8",
                        image_max=max(1, int(np.max(space.high))))
    if not np.issubdtype(space.dtype, np.floating) and not np.issubdtype(space.dtype, np.integer):
        raise ValueError(f"observation dtype {space.dtype} is not supported (floats, integers, booleans or uint8 "
                         f"images)")
    return ObsSpace(shape=tuple(int(d) for d in space.shape), dtype="float32")


def _action(space: gym.Space) -> DiscreteActions | MultiDiscreteActions | BoxActions:
    if isinstance(space, gym.spaces.Discrete):
        if int(space.start) != 0:
            raise ValueError(f"Discrete action space {space} must start at 0")
        return DiscreteActions(n=int(space.n))
    if isinstance(space, gym.spaces.MultiDiscrete):
        if space.nvec.ndim != 1:
            raise ValueError(f"MultiDiscrete action space {space} must be one-dimensional")
        return MultiDiscreteActions(nvec=tuple(int(n) for n in space.nvec))
    if isinstance(space, gym.spaces.Box):
        if len(space.shape) != 1 or not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
            raise ValueError(f"Box action space {space} must be one-dimensional with finite bounds")
        return BoxActions(low=tuple(float(x) for x in space.low), high=tuple(float(x) for x in space.high))
    raise ValueError(f"action space {space} is not supported: use Discrete, MultiDiscrete or a bounded Box")
