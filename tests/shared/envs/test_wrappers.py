"""The env section's wrappers: frame stacking keeps image dtypes, actions get clipped, and reward scaling and
normalisation reach the learner's chunks but never a reported return."""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest
from pydantic import ValidationError

from rlfleet.collector_worker.rollout import Rollout
from rlfleet.evaluator.episodes import evaluate
from rlfleet.shared.config.envcheck import spaces_of
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.preflight import preflight
from rlfleet.shared.config.run_config import EnvConfig, RunConfig
from rlfleet.shared.envs.build import make_env, make_vector_env
from rlfleet.shared.payloads.spaces import BoxPart, DiscretePart, MultiBinaryPart, MultiDiscretePart, ObsSpace
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


def test_normalized_rewards_settle_at_one_over_the_discounted_returns_spread_and_reports_stay_raw() -> None:
    """Four-step episodes paying 1 have discounted returns 1, 1.9, 2.71, 3.439 (gamma 0.9): once the running
    statistics have seen enough episodes, each training reward is 1 over their standard deviation."""
    env = EnvConfig(id=COUNT, kwargs={"length": 4, "reward": 1.0},
                    wrappers=[{"name": "normalize_reward", "gamma": 0.9}])
    rollout = Rollout(env, 2, flat_spaces(2, 2), EPSILON_GREEDY, seed=0)
    try:
        chunk = rollout.collect(400, epsilon=1.0)
    finally:
        rollout.close()
    spread = np.std([1.0, 1.9, 2.71, 3.439])
    assert np.allclose(chunk.arrays["rewards"][-40:], 1.0 / spread, rtol=0.02)
    assert chunk.episodes == [(4.0, 4, None)] * 200
    vec = make_vector_env(env, 1, training=False)  # the evaluator's
    try:
        vec.reset(seed=0)
        assert vec.step(np.zeros(1, np.int64))[1].tolist() == [1.0]
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


def observe(env: EnvConfig, steps: int) -> list[np.ndarray]:
    made = make_env(env)
    try:
        seen = [made.reset(seed=3)[0]]
        seen += [made.step(0)[0] for _ in range(steps)]
    finally:
        made.close()
    return seen


def test_obs_filter_keeps_the_listed_indices_of_the_last_axis() -> None:
    """CartPoleNoVel-v1 as a config: CartPole-v1's cart position and pole angle, its velocities left out."""
    full = observe(EnvConfig(id="CartPole-v1"), 5)
    novel = EnvConfig.model_validate({"id": "CartPole-v1", "wrappers": [{"name": "obs_filter", "keep": [0, 2]}]})
    kept = observe(novel, 5)
    np.testing.assert_array_equal(np.stack(kept), np.stack(full)[:, [0, 2]])
    assert spaces_of(novel).obs == ObsSpace(shape=(2,), dtype="float32")


def test_obs_filter_keeps_the_named_keys_of_a_dict_and_positions_of_a_tuple() -> None:
    by_key = EnvConfig.model_validate({"id": "tests.support.userenv:AnySpace", "kwargs": {"space": "nested"},
                                       "wrappers": [{"name": "obs_filter", "keep": ["z"]}]})
    assert spaces_of(by_key).obs.parts == (DiscretePart(n=2), MultiDiscretePart(nvec=(3, 3), start=(0, 0)))
    by_position = EnvConfig.model_validate({"id": "tests.support.userenv:AnySpace", "kwargs": {"space": "tuple"},
                                            "wrappers": [{"name": "obs_filter", "keep": [2, 0]}]})
    assert spaces_of(by_position).obs.parts == (MultiBinaryPart(size=2), DiscretePart(n=3))


@pytest.mark.parametrize(("env", "message"), [
    ({"id": "CartPole-v1", "keep": [0, 4]},
     "env.wrappers[0]: obs_filter: keep [4]: the observation has 4 indices, keep some of 0 to 3"),
    ({"id": "CartPole-v1", "keep": ["x"]}, "keep names keys, but the observation is not a Dict: keep indices of the "
                                           "last axis"),
    ({"id": "tests.support.userenv:DictObs", "keep": ["mode", "speed"]},
     "keep ['speed']: the observation has no such key; its keys are ['mode', 'position']"),
    ({"id": "tests.support.userenv:DictObs", "keep": [0]}, "the observation is a Dict: keep its keys, some of "
                                                            "['mode', 'position']"),
    ({"id": "tests.support.userenv:Cue", "keep": [0]}, "needs a Box, Tuple or Dict observation"),
])
def test_obs_filter_refuses_indices_or_keys_the_env_lacks_when_the_config_loads(env: dict, message: str) -> None:
    config = RunConfig.model_validate({"env": {"id": env["id"], "wrappers": [{"name": "obs_filter",
                                                                               "keep": env["keep"]}]}})
    with pytest.raises(ValueError) as info:
        preflight(config)
    assert message in str(info.value)


@pytest.mark.parametrize(("keep", "message"), [
    ([0, 2, 0], "keep lists 0 more than once"),
    ([], "at least 1 item"),
    ([-1], "greater than or equal to 0"),
])
def test_obs_filter_keep_lists_are_checked_as_values(keep: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EnvConfig.model_validate({"wrappers": [{"name": "obs_filter", "keep": keep}]})


def test_frame_stack_of_discrete_observations_is_a_multidiscrete_read_one_hot() -> None:
    env = EnvConfig.model_validate({"id": "tests.support.userenv:Cue", "wrappers": [{"name": "frame_stack",
                                                                                    "frames": 4}]})
    obs = spaces_of(env).obs
    assert obs == ObsSpace(shape=(4,), dtype="uint8", parts=(MultiDiscretePart(nvec=(4,) * 4, start=(1,) * 4),))
    seen = observe(env, 2)
    assert seen[0].tolist() == [seen[0][0]] * 4 and seen[2][:2].tolist() == [seen[0][0]] * 2  # padded with the first
    assert obs.encoded_size == 16


def test_frame_stack_of_multibinary_and_multidiscrete_parts_keeps_them_integer() -> None:
    """gymnasium describes a stack of MultiDiscrete or MultiBinary observations as an integer Box, which the policy
    would read as numbers; the stack keeps their kind, so they are still read one-hot and 0/1."""
    env = EnvConfig.model_validate({"id": "tests.support.userenv:AnySpace", "kwargs": {"space": "tuple"},
                                    "wrappers": [{"name": "frame_stack", "frames": 2}]})
    assert spaces_of(env).obs.parts == (MultiDiscretePart(nvec=(3, 3), start=(0, 0)), BoxPart(size=4),
                                        MultiBinaryPart(size=4))
    nested = EnvConfig.model_validate({"id": "tests.support.userenv:AnySpace", "kwargs": {"space": "multidiscrete"},
                                       "wrappers": [{"name": "frame_stack", "frames": 2}]})
    assert spaces_of(nested).obs.parts == (MultiDiscretePart(nvec=(3, 2, 4) * 2, start=(0,) * 6),)


def test_normalize_obs_needs_a_box_part() -> None:
    with pytest.raises(ValueError, match="normalises the Box parts of an observation, and this env's .* has none"):
        preflight(RunConfig.model_validate({"env": {"id": "tests.support.userenv:Cue",
                                                    "wrappers": [{"name": "normalize_obs"}]}}))
    plan = RunPlan.of(RunConfig.model_validate({"env": {"id": "tests.support.userenv:DictObs",
                                                        "wrappers": [{"name": "normalize_obs"}]}}))
    assert plan.spaces.obs.norm_shape == (2,)  # the position's two values; the mode is read one-hot


def test_a_gymnasium_wrapper_by_its_import_path_wraps_every_env() -> None:
    env = EnvConfig(id="CartPole-v1", wrappers=[{"name": "gymnasium",
                                                 "call": "gymnasium.wrappers:TimeAwareObservation"}])
    for training in (True, False):
        assert make_env(env, training=training).observation_space.shape == (5,)  # CartPole's 4 and the time
    assert spaces_of(env).obs.shape == (5,)


def test_a_users_reward_wrapper_marked_only_in_training_leaves_the_evaluators_returns_alone() -> None:
    wrapper = {"name": "gymnasium", "call": "tests.support.userenv:Bonus", "kwargs": {"bonus": 2.0}}
    for only_in_training, evaluated in ((True, 1.0), (False, 3.0)):
        env = EnvConfig(id=COUNT, wrappers=[{**wrapper, "only_in_training": only_in_training}])
        trained, played = make_env(env, training=True), make_env(env, training=False)
        trained.reset(seed=0), played.reset(seed=0)
        assert trained.step(0)[1] == 3.0 and played.step(0)[1] == evaluated


@pytest.mark.parametrize(("call", "problem"), [
    ("no_such_module:Wrapper", "env.wrappers[0]: gymnasium: cannot import module 'no_such_module'"),
    ("tests.support.userenv:Bonsu", "has no class or function 'Bonsu' (did you mean 'Bonus'?)"),
    ("tests.support.userenv:not_a_wrapper", "returned object, not a gymnasium wrapper"),
])
def test_a_gymnasium_wrapper_that_does_not_load_or_wrap_is_refused_naming_it(call: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        make_env(EnvConfig(id=COUNT, wrappers=[{"name": "gymnasium", "call": call}]))


def test_a_gymnasium_wrapper_is_named_module_colon_name() -> None:
    with pytest.raises(ValidationError, match="call"):
        EnvConfig(id=COUNT, wrappers=[{"name": "gymnasium", "call": "gymnasium.wrappers.TimeAwareObservation"}])
