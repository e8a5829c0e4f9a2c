"""A corridor of `length` cells: start in the first, reach the last. The smallest env of your own that rlfleet trains.

Observation: the agent's position as a fraction of the corridor (Box of shape (1,)); actions: 0 = left,
1 = right; reward 1 on reaching the end and -0.01 for every other step, so the best return is 1 - 0.01 * (length - 2).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, length: int = 8) -> None:
        if length < 2:
            raise ValueError(f"a corridor needs at least 2 cells, got length={length}")
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.position = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.position / (self.length - 1)], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.position = 0
        return self._obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.position = max(0, self.position - 1) if int(action) == 0 else self.position + 1
        done = self.position == self.length - 1
        return self._obs(), 1.0 if done else -0.01, done, False, {}
