"""The env section's wrappers: frame stacking keeps image dtypes, actions get clipped, and reward scaling
reaches the learner's chunks but never a reported return."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlfleet.collector_worker.rollout import Rollout
from rlfleet.evaluator.episodes import evaluate
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.preflight import preflight
from rlfleet.shared.config.run_config import EnvConfig, RunConfig
from rlfleet.shared.envs.build import make_vector_env
from tests.support.policies import EPSILON_GREEDY, PENDULUM, flat_spaces

IMAGE = "tests.support.userenv:ImageEnv"
COUNT = "tests.support.userenv:CountEnv"


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


def test_clip_actions_clips_into_the_action_bounds_and_keeps_declaring_them() -> None:
    vec = make_vector_env(EnvConfig(id="tests.support.userenv:PushEnv", wrappers=[{"name": "clip_actions"}]), 1)
    try:
        assert vec.single_action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        vec.reset(seed=0)
        vec.step(np.array([[5.0]], np.float32))
        assert vec.envs[0].unwrapped.received.tolist() == [1.0]  # type: ignore[attr-defined]
    finally:
        vec.close()


def test_a_run_with_clipped_actions_can_be_planned() -> None:
    cfg = RunConfig.model_validate({"env": {"id": "Pendulum-v1", "wrappers": [{"name": "clip_actions"}]},
                                    "algo": {"name": "ppo"}, "sampling": {"unit": "chunk"},
                                    "replay": {"sampler": "fifo", "max_use": 1}})
    assert RunPlan.of(cfg).spaces == PENDULUM


SCALED = EnvConfig(id=COUNT, kwargs={"length": 4, "reward": 1.0}, wrappers=[{"name": "scale_reward", "scale": 0.1}])


def test_scaled_rewards_are_trained_on_but_collectors_report_raw_returns() -> None:
    rollout = Rollout(SCALED, 2, flat_spaces(2, 2), EPSILON_GREEDY, seed=0)
    try:
        chunk = rollout.collect(8, epsilon=1.0)
    finally:
        rollout.close()
    assert np.allclose(chunk.arrays["rewards"], 0.1)
    assert chunk.episodes == [(4.0, 4, None)] * 4


def test_the_evaluator_reports_raw_returns() -> None:
    returns, lengths = evaluate(lambda obs: np.zeros(len(obs), np.int64), SCALED, num_envs=2, episodes=4, seed=0)
    assert returns == [4.0] * 4 and lengths == [4] * 4


@pytest.mark.parametrize(("training", "reward"), [(True, 0.1), (False, 1.0)])
def test_training_only_wrappers_are_left_out_of_non_training_envs(training: bool, reward: float) -> None:
    vec = make_vector_env(SCALED, 1, training=training)
    try:
        vec.reset(seed=0)
        assert vec.step(np.zeros(1, np.int64))[1].tolist() == [pytest.approx(reward)]
    finally:
        vec.close()


def test_normalize_obs_leaves_the_env_raw_and_refuses_images() -> None:
    """The statistics belong to the learner (learner_worker/obsnorm.py): payloads hold raw observations."""
    env = EnvConfig.model_validate({"id": "Pendulum-v1", "wrappers": [{"name": "normalize_obs", "clip": 3}]})
    vec = make_vector_env(env, 1)
    obs, _ = vec.reset(seed=0)
    vec.close()
    assert np.abs(obs).max() <= 8.0 and env.wrappers[0].clip == 3
    with pytest.raises(ValueError, match=r"env.wrappers\[0\]: normalize_obs: needs float \(Box\) observations"):
        preflight(RunConfig(env=EnvConfig.model_validate({"id": "tests.support.pixelgrid:PixelGrid",
                                                          "wrappers": [{"name": "normalize_obs"}]})))
