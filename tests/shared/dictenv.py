"""A Dict-observation env for tests: a position (Box), a mode (Discrete), optionally an image."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class DictObs(gym.Env):
    action_space = gym.spaces.Discrete(2)

    def __init__(self, image: bool = False) -> None:
        spaces: dict[str, gym.Space] = {"position": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
                                        "mode": gym.spaces.Discrete(3)}
        if image:
            spaces["pixels"] = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
        self.observation_space = gym.spaces.Dict(spaces)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), float(action), self.t >= 10, False, {}
