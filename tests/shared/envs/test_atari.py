"""The `atari` wrapper on real ALE games: 84x84 uint8 frames, clipped rewards and lives as episodes for training
only, whole games with the game's own score for everything a user sees, and the sections it refuses."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ale_py", reason="the atari extra (pip install 'rlfleet[atari]') is not installed")
pytest.importorskip("cv2", reason="the atari extra (pip install 'rlfleet[atari]') is not installed")

from rlfleet.collector_worker.rollout import Rollout  # noqa: E402
from rlfleet.shared.config.envcheck import EnvSectionError, build_problem  # noqa: E402
from rlfleet.shared.config.run_config import EnvConfig  # noqa: E402
from rlfleet.shared.envs.build import ENV_ERROR, make_env, make_vector_env  # noqa: E402
from rlfleet.shared.envs.gymspaces import describe  # noqa: E402
from tests.support.policies import EPSILON_GREEDY  # noqa: E402

NO_SKIP = {"frameskip": 1, "repeat_action_probability": 0.0}


def atari(game: str, *extra: dict[str, Any], **kwargs: Any) -> EnvConfig:
    return EnvConfig.model_validate({"id": f"ALE/{game}-v5", "kwargs": {**NO_SKIP, **kwargs},
                                     "wrappers": [{"name": "atari"}, *extra]})


def test_pong_observes_84x84_uint8_frames_that_stack_channels_first() -> None:
    env = make_env(atari("Pong"))
    try:
        obs, _ = env.reset(seed=0)
        assert obs.shape == (84, 84) and obs.dtype == np.uint8
        obs, *_ = env.step(0)
        assert obs.shape == (84, 84) and obs.dtype == np.uint8 and obs.max() > 0
    finally:
        env.close()
    stacked = make_env(atari("Pong", {"name": "frame_stack", "frames": 4}))
    try:
        obs_space = describe(stacked).obs
    finally:
        stacked.close()
    assert (obs_space.shape, obs_space.dtype, obs_space.image_max, obs_space.image) == ((4, 84, 84), "uint8", 255,
                                                                                         True)


def test_training_clips_rewards_and_ends_episodes_at_lost_lives_but_reports_whole_games() -> None:
    """Space Invaders scores 5 to 30 points a kill and has 3 lives: a game's reported return is its score, while
    the learner's rewards are their signs and each lost life ends one of its episodes."""
    env = atari("SpaceInvaders")
    rollout = Rollout(env, 1, describe(make_env(env)), EPSILON_GREEDY, seed=3)
    try:
        chunk = rollout.collect(3000, random=True)
    finally:
        rollout.close()
    rewards, terminated = chunk.arrays["rewards"][:, 0], chunk.arrays["terminated"][:, 0]
    assert set(np.unique(rewards)) <= {-1.0, 0.0, 1.0} and rewards.max() == 1.0
    assert chunk.episodes, "no whole game ended in 3000 steps"
    score, length, _ = chunk.episodes[0]
    assert terminated[length - 1] and terminated[:length].sum() == 3  # one training episode per life
    kills = rewards[:length].sum()
    assert kills > 0 and score >= 5 * kills and score % 5 == 0
    ended = np.flatnonzero(terminated)
    assert len(chunk.episodes) <= len(ended) // 3


@pytest.mark.parametrize(("training", "lives_at_first_end"), [(True, 4), (False, 0)])
def test_a_lost_life_ends_an_episode_in_training_only(training: bool, lives_at_first_end: int) -> None:
    env = make_env(atari("Breakout"), training=training)
    rng = np.random.default_rng(0)
    try:
        env.reset(seed=1)
        for _ in range(5000):
            _, _, terminated, truncated, _ = env.step(int(rng.integers(4)))
            if terminated or truncated:
                break
        assert terminated and env.unwrapped.ale.lives() == lives_at_first_end  # type: ignore[attr-defined]
        if training:  # the game goes on after a lost life: the next episode starts with the lives left
            env.reset()
            assert env.unwrapped.ale.lives() == 4  # type: ignore[attr-defined]
    finally:
        env.close()


def test_the_atari_wrapper_on_a_non_ale_env_is_refused_naming_it() -> None:
    env = EnvConfig.model_validate({"id": "CartPole-v1", "wrappers": [{"name": "frame_stack", "frames": 2},
                                                                      {"name": "atari"}]})
    problem = build_problem(env)
    assert problem is not None and problem.startswith("env.wrappers[1]: atari: needs an Atari env from ale-py")
    assert "ALE/Pong-v5" in problem and "remove the wrapper" in problem


def test_an_env_that_skips_frames_itself_is_refused_saying_to_set_frameskip_1() -> None:
    env = EnvConfig.model_validate({"id": "ALE/Pong-v5", "wrappers": [{"name": "atari"}]})
    with pytest.raises(EnvSectionError, match=r"env.wrappers\[0\]: atari: the env skips frames itself .* "
                                              r"set env.kwargs.frameskip: 1"):
        make_env(env)


def test_an_ale_id_without_ale_py_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ale_py", None)  # what an install without the extra imports
    with pytest.raises(EnvSectionError, match=r"env.id: ALE/NoSuchGame-v5 needs ale_py .*install the atari extra, "
                                              r"pip install 'rlfleet\[atari\]'"):
        make_env(EnvConfig(id="ALE/NoSuchGame-v5"))


def test_a_game_whose_step_raised_restarts_whole_not_at_its_next_life() -> None:
    """ResetOnError resets an env after an exception; the game must restart, as its recorded episode does, rather
    than go on from a state the failed step left behind."""
    vec = make_vector_env(atari("Breakout"), 1, reset_on_error=True)
    game: Any = vec.envs[0].unwrapped  # ALE's AtariEnv
    rng = np.random.default_rng(0)
    try:
        vec.reset(seed=1)
        while game.ale.lives() == 5:
            vec.step(rng.integers(4, size=1))
        assert game.ale.lives() == 4  # the life is lost, the game goes on

        def fault(action: Any) -> None:
            del game.step  # once: the reset that follows steps the real game
            raise RuntimeError("emulator fault")

        game.step = fault
        _, _, _, truncated, info = vec.step(rng.integers(4, size=1))
        assert truncated[0] and info["final_info"]["_" + ENV_ERROR][0]
        assert game.ale.lives() == 5
    finally:
        vec.close()
