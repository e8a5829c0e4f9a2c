"""The Atari env as a user builds it without rlfleet's `atari` wrapper: a factory entry point around gymnasium's
own AtariPreprocessing (noop starts, frame skip 4 with max-pooling, 84x84 grayscale), frame stacking left to the
env section's `frame_stack` wrapper. bench/pixels.py runs on it where configs/pong_ppo.yaml is not there yet
(bench/pong_factory_ppo.yaml names it); it is the 15-line factory the issue's first figures came from.
"""

from __future__ import annotations

from typing import Any

import ale_py
import gymnasium as gym
from gymnasium.wrappers import AtariPreprocessing

gym.register_envs(ale_py)


def atari(game: str = "Pong", **kwargs: Any) -> gym.Env:
    """ALE/<game>-v5 without ALE's own frame skip (AtariPreprocessing's max-pools over its 4), preprocessed.

    `kwargs` go to gym.make (repeat_action_probability, say)."""
    env = gym.make(f"ALE/{game}-v5", frameskip=1, **kwargs)
    return AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True)


def ale(env_id: str, **kwargs: Any) -> gym.Env:
    """gym.make of an ALE id in a process that has not imported ale_py (SB3's SubprocVecEnv workers): importing
    this module registers the ALE envs."""
    return gym.make(env_id, **kwargs)
