"""make_env's render_mode: handed to gym.make, and to a user's entry point only when its signature takes it; and
when make_native_vector_env gives gymnasium's own vectorized implementation of a section."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.vector import SyncVectorEnv

from rlfleet.shared.config.run_config import EnvConfig
from rlfleet.shared.envs.build import make_env, make_native_vector_env


def test_a_registered_id_is_made_with_the_render_mode() -> None:
    env = make_env(EnvConfig(id="CartPole-v1"), training=False, render_mode="rgb_array")
    try:
        env.reset(seed=0)
        frame = env.render()
        assert isinstance(frame, np.ndarray) and frame.ndim == 3 and frame.dtype == np.uint8
    finally:
        env.close()


def test_an_entry_point_that_takes_render_mode_gets_it() -> None:
    env = make_env(EnvConfig(id="tests.support.userenv:PaintedCountEnv", kwargs={"length": 3}),
                   render_mode="rgb_array")
    env.reset(seed=0)
    env.step(0)
    assert env.unwrapped.render_mode == "rgb_array"
    assert (env.render() == 40).all()


def test_an_entry_point_without_render_mode_is_built_without_it() -> None:
    env = make_env(EnvConfig(id="tests.support.userenv:CountEnv"), render_mode="rgb_array")
    assert env.unwrapped.render_mode is None


# ----- gymnasium's own vectorized implementations (the evaluator's fast path) -----------------------------------

def test_cartpole_gets_its_native_vector_env_with_the_sections_time_limit() -> None:
    vec = make_native_vector_env(EnvConfig(id="CartPole-v1", max_episode_steps=20), 3)
    assert vec is not None and vec.num_envs == 3 and not isinstance(vec, SyncVectorEnv)
    try:
        vec.reset(seed=0)
        steps = 0
        while True:
            steps += 1
            _, _, term, trunc, _ = vec.step(np.zeros(3, np.int64))
            if (term | trunc).all() or steps == 21:
                break
        assert steps <= 20  # always pushing left ends every episode, and never after the section's limit
    finally:
        vec.close()


def _needs_a_missing_package(**kwargs: object) -> None:
    raise ImportError("no module named 'jax'")


def _preprocessing(num_envs: int = 1, **kwargs: Any) -> CartPoleVectorEnv:
    """A vector env whose observations are not the single env's (as ALE's, which resizes and stacks frames)."""
    vec = CartPoleVectorEnv(num_envs=num_envs, **kwargs)
    vec.single_observation_space = gym.spaces.Box(0, 255, (84, 84), np.uint8)
    return vec


def _more_actions(num_envs: int = 1, **kwargs: Any) -> CartPoleVectorEnv:
    vec = CartPoleVectorEnv(num_envs=num_envs, **kwargs)
    vec.single_action_space = gym.spaces.Discrete(3)
    return vec


BROKEN_VECTOR = "RlfleetTestEnvs/BrokenVector-v0"
OTHER_OBSERVATIONS = "RlfleetTestEnvs/OtherObservations-v0"
OTHER_ACTIONS = "RlfleetTestEnvs/OtherActions-v0"
for _id, _vector in ((BROKEN_VECTOR, _needs_a_missing_package), (OTHER_OBSERVATIONS, _preprocessing),
                     (OTHER_ACTIONS, _more_actions)):
    if _id not in gym.registry:
        gym.register(id=_id, entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv",
                     vector_entry_point=_vector, max_episode_steps=50)


@pytest.mark.parametrize("env", [
    EnvConfig(id="tests.support.userenv:CountEnv"),  # the user's own entry point
    EnvConfig(id="Acrobot-v1"),  # no vector_entry_point registered
    EnvConfig(id="CartPole-v1", wrappers=[{"name": "frame_stack", "frames": 2}]),  # a wrapper that applies
    EnvConfig(id=BROKEN_VECTOR),  # its vectorized implementation does not build here
    EnvConfig(id=OTHER_OBSERVATIONS),  # ... returns other observations than the single env
    EnvConfig(id=OTHER_ACTIONS),  # ... takes other actions
])
def test_sections_without_a_usable_native_vector_env_get_none(env: EnvConfig) -> None:
    assert make_native_vector_env(env, 2) is None


def test_training_only_wrappers_do_not_prevent_the_native_vector_env() -> None:
    vec = make_native_vector_env(EnvConfig(id="CartPole-v1", wrappers=[{"name": "scale_reward", "scale": 0.1}]), 2)
    assert vec is not None
    vec.close()


def test_a_refused_section_is_not_built_again() -> None:
    """The evaluator asks at every validation: a vectorized implementation that failed once is not retried."""
    calls: list[int] = []

    def counting(num_envs: int = 1, **kwargs: Any) -> CartPoleVectorEnv:
        calls.append(num_envs)
        raise ImportError("no module named 'jax'")

    gym.register(id="RlfleetTestEnvs/CountedVector-v0", vector_entry_point=counting, max_episode_steps=50,
                 entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv")
    env = EnvConfig(id="RlfleetTestEnvs/CountedVector-v0")
    assert make_native_vector_env(env, 2) is None and make_native_vector_env(env, 2) is None
    assert calls == [2]
