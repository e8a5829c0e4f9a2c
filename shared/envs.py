"""Vector environments built the same way by collectors, the evaluator and the benchmark baseline."""

from __future__ import annotations

import logging
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from shared.config import EnvConfig

log = logging.getLogger(__name__)
ENV_ERROR = "env_error"


class ResetOnError(gym.Wrapper):
    """An exception inside `step` resets this env instead of killing the process.

    The failed step comes back truncated with info[ENV_ERROR] set, so the vector env starts a new episode
    and the collector can drop the broken one and leave that step out of training."""

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        try:
            return self.env.step(action)
        except Exception as exc:  # any bug in a user's env: contain it to this env
            log.warning("environment raised %s: %s; resetting it", type(exc).__name__, exc)
            obs, _ = self.env.reset()
            return obs, 0.0, False, True, {ENV_ERROR: f"{type(exc).__name__}: {exc}"[:200]}


def make_vector_env(env: EnvConfig, num_envs: int, reset_on_error: bool = False) -> SyncVectorEnv:
    """SAME_STEP autoreset: a finished episode's last observation comes back in info['final_obs'] and the
    returned observation is already the next episode's first, so every step is a real transition."""

    def make() -> gym.Env:
        made = gym.make(env.id)
        return ResetOnError(made) if reset_on_error else made

    return SyncVectorEnv([make for _ in range(num_envs)], autoreset_mode=AutoresetMode.SAME_STEP)
