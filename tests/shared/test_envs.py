"""make_env's render_mode: handed to gym.make, and to a user's entry point only when its signature takes it."""

from __future__ import annotations

import numpy as np

from shared.config import EnvConfig
from shared.envs import make_env


def test_a_registered_id_is_made_with_the_render_mode() -> None:
    env = make_env(EnvConfig(id="CartPole-v1"), training=False, render_mode="rgb_array")
    try:
        env.reset(seed=0)
        frame = env.render()
        assert isinstance(frame, np.ndarray) and frame.ndim == 3 and frame.dtype == np.uint8
    finally:
        env.close()


def test_an_entry_point_that_takes_render_mode_gets_it() -> None:
    env = make_env(EnvConfig(id="tests.shared.userenv:PaintedCountEnv", kwargs={"length": 3}),
                   render_mode="rgb_array")
    env.reset(seed=0)
    env.step(0)
    assert env.unwrapped.render_mode == "rgb_array"
    assert (env.render() == 40).all()


def test_an_entry_point_without_render_mode_is_built_without_it() -> None:
    env = make_env(EnvConfig(id="tests.shared.userenv:CountEnv"), render_mode="rgb_array")
    assert env.unwrapped.render_mode is None
