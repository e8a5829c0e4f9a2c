"""From gymnasium's spaces to rlfleet's (shared/payloads/spaces.py), refusing what rlfleet cannot train.

Kept apart from shared/payloads/spaces.py so that the models can be imported without gymnasium (the coordinator).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import FlattenObservation

from rlfleet.shared.payloads.spaces import IMAGE_CHANNELS, BoxActions, DiscreteActions, MultiDiscreteActions, ObsSpace, Spaces


def describe(env: gym.Env | gym.vector.VectorEnv) -> Spaces:
    """The spaces of an env (or of one env of a vector env); raises ValueError for spaces rlfleet cannot train."""
    obs_space = getattr(env, "single_observation_space", env.observation_space)
    act_space = getattr(env, "single_action_space", env.action_space)
    action = _action(act_space)
    mask = _mask(env)
    if mask is not None and not (isinstance(action, DiscreteActions) and mask[1] == action.n):
        raise ValueError(f"the observation's action_mask has {mask[1]} entries for action space {act_space}: a mask "
                         f"needs Discrete actions, one entry per action")
    return Spaces(obs=_obs(obs_space), action=action, action_mask_offset=None if mask is None else mask[0])


MASK_KEY = "action_mask"


def _mask(env: gym.Env | gym.vector.VectorEnv) -> tuple[int, int] | None:
    """(offset, size) of a Dict observation's `action_mask` once shared/envs/build.py flattened it (keys in sorted
    order)."""
    inner = env.envs[0] if isinstance(env, gym.vector.SyncVectorEnv) else env
    while isinstance(inner, gym.Wrapper):
        if isinstance(inner, FlattenObservation):
            space = inner.env.observation_space
            if not isinstance(space, gym.spaces.Dict) or MASK_KEY not in space.spaces:
                return None
            if inner.observation_space.shape != getattr(env, "single_observation_space", env.observation_space).shape:
                raise ValueError("a wrapper reshapes an observation that carries an action mask: the mask's place "
                                 "in it would be lost")
            offset = 0
            for key, sub in space.spaces.items():  # gymnasium keeps a Dict's keys sorted; flatten follows them
                if key == MASK_KEY:
                    return offset, gym.spaces.flatdim(sub)
                offset += gym.spaces.flatdim(sub)
        inner = inner.env
    return None


def _obs(space: gym.Space) -> ObsSpace:
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"observation space {space} is not supported: use a Box, or a Dict of flat Boxes")
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
