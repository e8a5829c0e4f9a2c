"""From gymnasium's spaces to rlfleet's (shared/spaces.py), refusing what rlfleet cannot train.

Kept apart from shared/spaces.py so that the models can be imported without gymnasium (the coordinator).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from shared.spaces import IMAGE_CHANNELS, BoxActions, DiscreteActions, MultiDiscreteActions, ObsSpace, Spaces


def describe(env: gym.Env | gym.vector.VectorEnv) -> Spaces:
    """The spaces of an env (or of one env of a vector env); raises ValueError for spaces rlfleet cannot train."""
    obs_space = getattr(env, "single_observation_space", env.observation_space)
    act_space = getattr(env, "single_action_space", env.action_space)
    return Spaces(obs=_obs(obs_space), action=_action(act_space))


def _obs(space: gym.Space) -> ObsSpace:
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"observation space {space} is not supported: use a Box, or a Dict of flat Boxes")
    if space.dtype == np.uint8:
        if len(space.shape) == 3 and not (space.shape[-1] in IMAGE_CHANNELS or space.shape[0] in IMAGE_CHANNELS):
            raise ValueError(f"uint8 observation of shape {space.shape} is not an image with 1, 3 or 4 channels "
                             f"first or last")
        return ObsSpace(shape=tuple(int(d) for d in space.shape), dtype="uint8")
    if not np.issubdtype(space.dtype, np.floating) and not np.issubdtype(space.dtype, np.integer):
        raise ValueError(f"observation dtype {space.dtype} is not supported (floats, integers or uint8 images)")
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
