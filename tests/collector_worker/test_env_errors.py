"""An environment that raises: the collector contains it, drops the broken episode, counts the error."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control import CartPoleEnv

from collector_worker.rollout import Rollout
from shared.config import EnvConfig
from tests.policies import CARTPOLE, EPSILON_GREEDY


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
    FlakyCartPole.instances = 0
    rollout = Rollout(EnvConfig(id="FlakyCartPole-v0"), 2, CARTPOLE, EPSILON_GREEDY, seed=0)
    chunk = rollout.collect(8, epsilon=0.0)
    a = chunk.arrays
    assert chunk.env_errors == 1
    assert not a["valid"][4, 0] and a["valid"].sum() == a["valid"].size - 1
    assert a["truncated"][4, 0] and not a["terminated"][4, 0]
    # The broken episode (4 good steps, then the failure) is not reported; env 1 is untouched.
    assert all(length != 5 for _, length in chunk.episodes)
    # The env starts over: the next observation is a fresh reset state (CartPole resets within +-0.05).
    assert np.all(np.abs(a["obs"][5, 0]) <= 0.05)
    assert chunk.env_steps == 16
