"""Small user environments reached through entry points (`tests.support.userenv:CountEnv`), as a user's own
module would be: not registered with gymnasium, configured only through the env section's kwargs."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class CountEnv(gym.Env):
    """Observation [t, length]; every step pays `reward`; the episode terminates after `length` steps.

    `nan_reward_at` / `nan_obs_at` make that step (1-based, in every episode) return NaN instead; `raise_at` makes
    it raise (a bug in a user's env)."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int = 10, reward: float = 1.0, nan_reward_at: int | None = None,
                 nan_obs_at: int | None = None, raise_at: int | None = None) -> None:
        self.length, self.reward = length, reward
        self.raise_at = raise_at
        self.nan_reward_at, self.nan_obs_at = nan_reward_at, nan_obs_at
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        if self.t == self.raise_at:
            raise RuntimeError(f"simulated bug at step {self.t}")
        obs = self._obs()
        if self.t == self.nan_obs_at:
            obs[0] = np.nan
        reward = float("nan") if self.t == self.nan_reward_at else self.reward
        return obs, reward, self.t >= self.length, False, {}

    def _obs(self) -> np.ndarray:
        return np.array([self.t, self.length], np.float32)


def short_count_env(length: int) -> gym.Env:
    """A factory entry point: `tests.support.userenv:short_count_env` with kwargs {length: ...}."""
    return CountEnv(length=length, reward=0.5)


def not_an_env() -> object:
    return object()


class ImageEnv(gym.Env):
    """8x8 RGB uint8 frames whose pixels all equal the step count."""

    observation_space = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._frame(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return self._frame(), 1.0, False, False, {}

    def _frame(self) -> np.ndarray:
        return np.full((8, 8, 3), self.t, np.uint8)


class IntImageEnv(gym.Env):
    """6x6x1 integer frames of `dtype` with values in [0, high] (the step count, capped): other image envs'
    int32 or uint16 observations."""

    action_space = gym.spaces.Discrete(2)

    def __init__(self, high: int = 3, dtype: str = "int32") -> None:
        self.observation_space = gym.spaces.Box(0, high, (6, 6, 1), np.dtype(dtype))
        self.high, self.t = high, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._frame(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return self._frame(), 1.0, False, False, {}

    def _frame(self) -> np.ndarray:
        return np.full((6, 6, 1), min(self.t, self.high), self.observation_space.dtype)


class PushEnv(gym.Env):
    """A continuous action in [-1, 1]; remembers the last action it received."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self) -> None:
        self.received: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.received = np.asarray(action)
        return np.zeros(1, np.float32), 0.0, False, False, {}


class PaintedCountEnv(CountEnv):
    """CountEnv that renders 6x4 RGB frames, all pixels 40 x the step count (up to 255), when asked to."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 25}

    def __init__(self, length: int = 10, render_mode: str | None = None) -> None:
        super().__init__(length=length)
        self.render_mode = render_mode

    def render(self) -> np.ndarray | None:
        return np.full((4, 6, 3), min(40 * self.t, 255), np.uint8) if self.render_mode == "rgb_array" else None


class DictObs(gym.Env):
    """A Dict observation: a position (Box), a mode (Discrete), optionally an image."""

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


class RecallEnv(gym.Env):
    """A memory task: the first observation shows a cue (-1 or +1), the next ones show nothing but, on the last
    step of `length`, a "choose now" flag; the episode pays 1 when the last action names the cue (0 for -1, 1 for
    +1), else 0. A memoryless policy averages 0.5; one that remembers the cue gets 1."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int = 4) -> None:
        self.length = length
        self.t = 0
        self.cue = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        self.cue = int(self.np_random.integers(0, 2))
        return np.array([2.0 * self.cue - 1.0, 0.0], np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        last = self.t >= self.length
        reward = float(int(action) == self.cue) if last else 0.0
        choose = 1.0 if self.t == self.length - 1 else 0.0
        return np.array([0.0, choose], np.float32), reward, last, False, {}
