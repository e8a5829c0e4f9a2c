"""Vector environments built the same way by collectors, the evaluator and the benchmark baseline."""

from __future__ import annotations

import gymnasium as gym
from gymnasium.vector import AutoresetMode, SyncVectorEnv


def make_vector_env(env_id: str, num_envs: int) -> SyncVectorEnv:
    """SAME_STEP autoreset: a finished episode's last observation comes back in info['final_obs'] and the
    returned observation is already the next episode's first, so every step is a valid transition."""
    return SyncVectorEnv(
        [lambda: gym.make(env_id) for _ in range(num_envs)], autoreset_mode=AutoresetMode.SAME_STEP
    )


def space_dims(env: SyncVectorEnv) -> tuple[int, int]:
    obs_space, act_space = env.single_observation_space, env.single_action_space
    if not isinstance(act_space, gym.spaces.Discrete) or obs_space.shape is None or len(obs_space.shape) != 1:
        raise ValueError(f"DQN needs a flat Box observation and a Discrete action space, got "
                         f"{obs_space} / {act_space}")
    return int(obs_space.shape[0]), int(act_space.n)
