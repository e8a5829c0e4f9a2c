"""The env section's wrappers: frame stacking keeps image dtypes, actions get clipped."""

from __future__ import annotations

import numpy as np

from shared.config import EnvConfig
from shared.envs import make_vector_env

IMAGE = "tests.shared.userenv:ImageEnv"


def test_frame_stack_of_uint8_images_stays_uint8_with_the_frames_on_a_new_axis() -> None:
    env = EnvConfig(id=IMAGE, wrappers=[{"name": "frame_stack", "frames": 4}])
    vec = make_vector_env(env, 2)
    try:
        obs, _ = vec.reset(seed=0)
        assert vec.single_observation_space.dtype == np.uint8
        assert vec.single_observation_space.shape == (4, 8, 8, 3)
        for _ in range(2):
            obs, *_ = vec.step(np.zeros(2, np.int64))
    finally:
        vec.close()
    assert obs.dtype == np.uint8 and obs.shape == (2, 4, 8, 8, 3)
    assert [int(frame[0, 0, 0]) for frame in obs[0]] == [0, 0, 1, 2]  # padded with the reset frame, oldest first


def test_clip_actions_clips_into_the_action_bounds() -> None:
    vec = make_vector_env(EnvConfig(id="tests.shared.userenv:PushEnv", wrappers=[{"name": "clip_actions"}]), 1)
    try:
        vec.reset(seed=0)
        vec.step(np.array([[5.0]], np.float32))
        assert vec.envs[0].unwrapped.received.tolist() == [1.0]  # type: ignore[attr-defined]
    finally:
        vec.close()
