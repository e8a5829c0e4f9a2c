"""A tiny image-observation task for tests: walk to the goal on a 5x5 grid seen only as pixels.

The observation is a 5x5x3 uint8 image (channel 0: the agent, channel 1: the goal, fixed in the far corner),
so a policy must read positions from pixels; actions are up, down, left, right. Reward 1 on reaching the
goal, -0.02 per step otherwise; episodes are cut after 20 steps. Optimal returns are 1 - 0.02 * (d - 1) for a
start d steps away (about 0.9 on average); a random walk rarely reaches the goal in time.

`DictPixelGrid` splits what the policy must know over a Dict observation: the agent is seen only in the image
(`frame`, 5x5x1) and the goal, drawn anew each episode, only as its coordinates (`goal`, MultiDiscrete [5, 5]).
Neither half alone beats a random walk, so a policy that solves it reads both: a multi-input encoder's task.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

SIZE = 5
MOVES = np.array([(-1, 0), (1, 0), (0, -1), (0, 1)])


class PixelGrid(gym.Env):
    observation_space = gym.spaces.Box(0, 255, (SIZE, SIZE, 3), np.uint8)
    action_space = gym.spaces.Discrete(4)

    def __init__(self, max_steps: int = 20) -> None:
        self.max_steps = max_steps
        self.goal = np.array([SIZE - 1, SIZE - 1])
        self.pos = np.zeros(2, np.int64)
        self.t = 0

    def _obs(self) -> np.ndarray:
        img = np.zeros((SIZE, SIZE, 3), np.uint8)
        img[self.pos[0], self.pos[1], 0] = 255
        img[self.goal[0], self.goal[1], 1] = 255
        return img

    def _place_goal(self) -> None:
        """The goal stays in the far corner."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._place_goal()
        while True:
            self.pos = self.np_random.integers(0, SIZE, 2)
            if not (self.pos == self.goal).all():
                break
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.pos = np.clip(self.pos + MOVES[int(action)], 0, SIZE - 1)
        self.t += 1
        reached = bool((self.pos == self.goal).all())
        return self._obs(), 1.0 if reached else -0.02, reached, self.t >= self.max_steps and not reached, {}


class DictPixelGrid(PixelGrid):
    observation_space = gym.spaces.Dict({"frame": gym.spaces.Box(0, 255, (SIZE, SIZE, 1), np.uint8),
                                         "goal": gym.spaces.MultiDiscrete([SIZE, SIZE])})

    def _obs(self) -> dict[str, np.ndarray]:  # type: ignore[override]
        frame = np.zeros((SIZE, SIZE, 1), np.uint8)
        frame[self.pos[0], self.pos[1], 0] = 255
        return {"frame": frame, "goal": self.goal.copy()}

    def _place_goal(self) -> None:
        self.goal = self.np_random.integers(0, SIZE, 2)
