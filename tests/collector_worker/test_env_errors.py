"""An environment that raises or returns NaN: the collector contains it, drops the broken episode, counts the
error."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control import CartPoleEnv

from rlfleet.collector_worker.rollout import Rollout
from rlfleet.shared.config.run_config import EnvConfig
from rlfleet.shared.envs.build import ENV_ERROR, ResetOnError
from tests.support.policies import CARTPOLE, EPSILON_GREEDY, flat_spaces


class FlakyCartPole(CartPoleEnv):
    """Raises on the 5th step call made by env instance 0 only."""

    instances = 0

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.index = FlakyCartPole.instances
        FlakyCartPole.instances += 1
        self.calls = 0

    def step(self, action):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.index == 0 and self.calls == 5:
            raise RuntimeError("simulated physics bug")
        return super().step(action)


@pytest.fixture(scope="module", autouse=True)
def _register() -> None:
    gym.register("FlakyCartPole-v0", entry_point=FlakyCartPole, max_episode_steps=500)


def test_env_exception_resets_that_env_and_marks_the_step_invalid() -> None:
    env = EnvConfig(id="FlakyCartPole-v0")  # validating it builds (and closes) an instance
    FlakyCartPole.instances = 0
    rollout = Rollout(env, 2, CARTPOLE, EPSILON_GREEDY, seed=0)
    chunk = rollout.collect(8, epsilon=0.0)
    a = chunk.arrays
    assert chunk.env_errors == 1
    assert not a["valid"][4, 0] and a["valid"].sum() == a["valid"].size - 1
    assert a["truncated"][4, 0] and not a["terminated"][4, 0]
    # The broken episode (4 good steps, then the failure) is not reported; env 1 is untouched.
    assert all(length != 5 for _, length, _ in chunk.episodes)
    # The env starts over: the next observation is a fresh reset state (CartPole resets within +-0.05).
    assert np.all(np.abs(a["obs"][5, 0]) <= 0.05)
    assert chunk.env_steps == 16


@pytest.mark.parametrize("kwarg", ["nan_reward_at", "nan_obs_at"])
def test_non_finite_reward_or_observation_is_an_env_error(kwarg: str) -> None:
    """Step 3 of every episode returns NaN: that step is invalid, truncated, and its episode is dropped."""
    env = EnvConfig(id="tests.support.userenv:CountEnv", kwargs={"length": 5, kwarg: 3})
    rollout = Rollout(env, 2, flat_spaces(2, 2), EPSILON_GREEDY, seed=0)
    try:
        chunk = rollout.collect(6, epsilon=0.0)
    finally:
        rollout.close()
    a = chunk.arrays
    assert chunk.env_errors == 4  # steps 3 and 6 (step 3 of the next episode) of both envs
    assert not a["valid"][[2, 5]].any() and a["valid"][[0, 1, 3, 4]].all()
    assert a["truncated"][2].all() and not a["terminated"][2].any()
    assert np.isfinite(a["rewards"]).all() and np.isfinite(a["obs"]).all() and np.isfinite(a["next_obs"]).all()
    assert a["obs"][3].tolist() == [[0, 5]] * 2  # the env started over
    assert chunk.episodes == []  # no episode finished without an error


class Emit(gym.Env):
    """Steps return a fixed observation and reward."""

    def __init__(self, obs: np.ndarray, reward: float = 0.0) -> None:
        floats = obs.dtype.kind == "f"
        self.observation_space = gym.spaces.Box(-np.inf if floats else 0, np.inf if floats else 255, obs.shape,
                                                obs.dtype)
        self.action_space = gym.spaces.Discrete(2)
        self.obs, self.reward = obs, reward

    def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
        return np.zeros_like(self.obs), {}

    def step(self, action):  # type: ignore[no-untyped-def]
        return self.obs, self.reward, False, False, {}


# shared.envs.build ignores it; pytest resets filters
@pytest.mark.filterwarnings("ignore:invalid value encountered in dot")
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize(("value", "error"), [(np.nan, True), (np.inf, True), (-np.inf, True), (0.0, False),
                                              (-1e4, False), (6e4, False)])  # 6e4: near float16's largest
def test_every_non_finite_float_observation_is_caught_and_no_finite_one(dtype: type, value: float,
                                                                         error: bool) -> None:
    obs = np.ones((2, 3), dtype)
    obs[1, 2] = value
    _, reward, terminated, truncated, info = ResetOnError(Emit(obs)).step(0)
    assert (ENV_ERROR in info) == error
    assert truncated == error and not terminated


@pytest.mark.parametrize("reward", [np.nan, np.inf, -np.inf])
def test_a_non_finite_reward_is_caught(reward: float) -> None:
    obs, returned, _, truncated, info = ResetOnError(Emit(np.ones(2, np.float32), reward)).step(0)
    assert truncated and returned == 0.0 and "non-finite reward" in info[ENV_ERROR]
    assert obs.tolist() == [0.0, 0.0]  # the env was reset


def test_integer_observations_are_not_checked() -> None:
    _, _, _, truncated, info = ResetOnError(Emit(np.full(3, 255, np.uint8))).step(0)
    assert not truncated and info == {}


def test_a_frame_that_changes_shape_mid_episode_is_an_env_error() -> None:
    """Step 4 of every episode returns a frame with one more channel: the vector env could not batch it (it raised
    out of the collector); now that step is an env error and the env starts over."""
    from rlfleet.shared.payloads.spaces import DiscreteActions, ObsSpace, Spaces

    env = EnvConfig(id="tests.support.frames:Frames", kwargs={"reshape_at": 4, "max_steps": 9})
    rollout = Rollout(env, 2, Spaces(obs=ObsSpace(shape=(1, 6, 7), dtype="uint8"), action=DiscreteActions(n=3)),
                      EPSILON_GREEDY, seed=0)
    try:
        chunk = rollout.collect(30, random=True)
    finally:
        rollout.close()
    invalid = ~chunk.arrays["valid"]
    assert chunk.env_errors > 0 and chunk.arrays["truncated"][invalid].all()
    assert chunk.arrays["obs"].shape == (30, 2, 1, 6, 7)
