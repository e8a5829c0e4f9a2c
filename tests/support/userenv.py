"""Small user environments reached through entry points (`tests.support.userenv:CountEnv`), as a user's own
module would be: not registered with gymnasium, configured only through the env section's kwargs."""

from __future__ import annotations

from typing import Any, SupportsFloat

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


OBS_SPACES: dict[str, gym.Space] = {
    "discrete": gym.spaces.Discrete(4),
    "discrete_from_3": gym.spaces.Discrete(4, start=3),
    "discrete_300": gym.spaces.Discrete(300),
    "discrete_negative": gym.spaces.Discrete(5, start=-2),
    "multidiscrete": gym.spaces.MultiDiscrete([3, 2, 4]),
    "multidiscrete_2d": gym.spaces.MultiDiscrete([[2, 3], [4, 5]], start=[[0, 1], [0, -1]]),
    "multidiscrete_huge": gym.spaces.MultiDiscrete([2**20]),
    "multibinary": gym.spaces.MultiBinary(5),
    "tuple": gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
                               gym.spaces.MultiBinary(2))),
    "nested": gym.spaces.Dict({"z": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.MultiDiscrete([3, 3]))),
                               "a": gym.spaces.Dict({"pos": gym.spaces.Box(-5.0, 5.0, (3,), np.float32),
                                                     "flags": gym.spaces.MultiBinary(3)})}),
    "masked": gym.spaces.Dict({"action_mask": gym.spaces.MultiBinary(2), "a_mode": gym.spaces.Discrete(3)}),
    "camera": gym.spaces.Dict({"speed": gym.spaces.Box(-1.0, 1.0, (1,), np.float32), "gear": gym.spaces.Discrete(3),
                               "cam": gym.spaces.Box(0, 255, (6, 4, 3), np.uint8)}),
    "grid_and_cue": gym.spaces.Tuple((gym.spaces.Box(0, 1, (1, 5, 5), np.uint8), gym.spaces.Discrete(2))),
    "five_channel_image": gym.spaces.Dict({"img": gym.spaces.Box(0, 255, (5, 5, 5), np.uint8)}),
    "text": gym.spaces.Text(5),
}


class AnySpace(gym.Env):
    """Random observations of the space OBS_SPACES[space], 10-step episodes, reward 1 for action 0.
    `out_of_range_at`: that step (1-based) observes the space's first leaf's largest value + 5, which no env of that
    space may return (a bug in a user's env)."""

    action_space = gym.spaces.Discrete(2)

    def __init__(self, space: str = "discrete", out_of_range_at: int | None = None) -> None:
        self.observation_space = OBS_SPACES[space]
        self.out_of_range_at, self.t = out_of_range_at, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        obs = self.observation_space.sample()
        if self.t == self.out_of_range_at:
            assert isinstance(self.observation_space, gym.spaces.Discrete)
            obs = int(self.observation_space.start + self.observation_space.n + 4)
        return obs, float(action == 0), self.t >= 10, False, {}


class Cue(gym.Env):
    """A memoryless task on a Discrete observation: observe a cue in 1..n (Discrete(n, start=1)), act cue - 1 for
    a reward of 1; `length`-step episodes. Solved (return = length) only by a policy that reads the cue: a tiny env
    for training through the one-hot encoding."""

    action_space: gym.spaces.Discrete

    def __init__(self, n: int = 4, length: int = 8) -> None:
        self.observation_space = gym.spaces.Discrete(n, start=1)
        self.action_space = gym.spaces.Discrete(n)
        self.n, self.length, self.t, self.cue = n, length, 0, 1

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t, self.cue = 0, int(self.np_random.integers(1, self.n + 1))
        return self.cue, {}

    def step(self, action):
        self.t += 1
        reward = float(int(action) == self.cue - 1)
        self.cue = int(self.np_random.integers(1, self.n + 1))
        return self.cue, reward, self.t >= self.length, False, {}


class Bonus(gym.RewardWrapper):
    """A user's own reward wrapper for `{name: gymnasium, call: "tests.support.userenv:Bonus"}`: adds `bonus` to
    every reward."""

    def __init__(self, env: gym.Env, bonus: float = 1.0) -> None:
        super().__init__(env)
        self.bonus = bonus

    def reward(self, reward: SupportsFloat) -> float:
        return float(reward) + self.bonus


def not_a_wrapper(env: gym.Env) -> object:
    return object()


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
