"""CartPole observed as a Dict, for tests of Dict observations: {"pole": [angle, angular velocity], "cart":
[position, velocity]}. rlfleet flattens it in sorted key order (cart, then pole), which is CartPole's own order, so
a CartPole policy plays it; the env returns its keys pole first, so a reader that flattened in the order it is
given would feed the policy the wrong values."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv


class DictCartPole(gym.Env):
    def __init__(self) -> None:
        self.inner = CartPoleEnv()
        box = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.observation_space = gym.spaces.Dict({"pole": box, "cart": box})
        self.action_space = self.inner.action_space

    @staticmethod
    def _obs(flat: np.ndarray) -> dict[str, np.ndarray]:
        return {"pole": flat[2:].astype(np.float32), "cart": flat[:2].astype(np.float32)}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, info = self.inner.reset(seed=seed)
        return self._obs(obs), info

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.inner.step(action)
        return self._obs(obs), float(reward), terminated, truncated, info
