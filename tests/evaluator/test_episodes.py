"""evaluate(): exactly `episodes` episodes, split evenly over the envs, played greedily; on gymnasium's own
vectorized implementation of the env where it registers one."""

from __future__ import annotations

from collections import Counter

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

import rlfleet.evaluator.episodes as episodes_module
from rlfleet.evaluator.episodes import Act, evaluate
from rlfleet.shared.config.run_config import EnvConfig
from tests.support.policies import flat_spaces, random_actor

torch.set_num_threads(1)

SEED_LENGTH_ID = "RlfleetTestEval/SeedLength-v0"


class SeedLengthEnv(gym.Env):
    """Episodes last 2 + 3 * (seed % 4) steps; reward = the episode length, so returns identify the env too.

    The vector env seeds sub-env i with seed + i, so envs play episodes of different lengths.
    """

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.limit = 2
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.limit = 2 + 3 * (seed % 4)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(2, 0.1, np.float32), float(self.limit), self.t >= self.limit, False, {}


if SEED_LENGTH_ID not in gym.registry:
    gym.register(id=SEED_LENGTH_ID, entry_point=SeedLengthEnv)


@pytest.fixture
def net() -> Act:
    return random_actor(flat_spaces(2, 2), hidden=(8,)).greedy


@pytest.mark.parametrize(("num_envs", "episodes"), [(1, 3), (2, 6), (3, 6), (3, 12)])
def test_each_env_contributes_equally(net, num_envs: int, episodes: int):
    returns, lengths = evaluate(net, EnvConfig(id=SEED_LENGTH_ID), num_envs=num_envs, episodes=episodes, seed=0)
    assert len(returns) == len(lengths) == episodes
    per_env = episodes // num_envs
    expected = Counter({2 + 3 * i: per_env for i in range(num_envs)})  # env i has seed i
    assert Counter(lengths) == expected
    # reward per step is the limit: return = limit**2 identifies the env that played the episode
    assert Counter(returns) == Counter({float(k * k): v for k, v in expected.items()})


def test_short_episodes_are_not_over_sampled(net):
    """Stopping at the first 4 finished episodes would give lengths [2, 2, 2, 5]."""
    _, lengths = evaluate(net, EnvConfig(id=SEED_LENGTH_ID), num_envs=2, episodes=4, seed=0)
    assert sorted(lengths) == [2, 2, 5, 5]


def test_started_episodes_are_finished(net):
    """No episode is cut short: every reported length is a full episode of its env."""
    _, lengths = evaluate(net, EnvConfig(id=SEED_LENGTH_ID), num_envs=2, episodes=6, seed=1)  # seeds 1, 2: limits 5, 8
    assert sorted(lengths) == [5, 5, 5, 8, 8, 8]


def test_greedy_cartpole_returns_equal_lengths():
    net = random_actor(seed=3).greedy
    returns, lengths = evaluate(net, EnvConfig(id="CartPole-v1"), num_envs=2, episodes=4, seed=0)
    assert len(returns) == len(lengths) == 4
    assert returns == [float(n) for n in lengths]
    assert all(1 <= n <= 500 for n in lengths)
    # deterministic: greedy policy, fixed seed
    assert evaluate(net, EnvConfig(id="CartPole-v1"), num_envs=2, episodes=4, seed=0) == (returns, lengths)


def test_greedy_cartpole_matches_a_manual_rollout():
    """Each env's first episode equals a single-env greedy rollout with the same seed (copies of the env)."""
    net = random_actor(seed=4).greedy
    returns, lengths = evaluate(net, EnvConfig(id="CartPole-v1"), num_envs=2, episodes=2, seed=10, native=False)
    expected = []
    for i in range(2):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=10 + i)
        total, done = 0, False
        while not done:
            obs, _, term, trunc, _ = env.step(int(net(obs[None])[0]))
            total += 1
            done = term or trunc
        env.close()
        expected.append(total)
    assert sorted(lengths) == sorted(expected)
    assert sorted(returns) == sorted(float(n) for n in expected)


class CountdownVectorEnv(VectorEnv):
    """A vectorized env with NEXT_STEP autoreset, like gymnasium's CartPoleVectorEnv: env i's k-th episode lasts
    2 + i + k steps at reward 1 per step, and the step after an episode's end only resets (reward 0)."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, max_episode_steps: int = 100) -> None:
        self.num_envs = num_envs
        self.single_observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.episode = np.zeros(num_envs, np.int64)
        self.t = np.zeros(num_envs, np.int64)
        self.resetting = np.zeros(num_envs, bool)

    def reset(self, *, seed=None, options=None):
        self.episode[:], self.t[:], self.resetting[:] = 0, 0, False
        return np.zeros((self.num_envs, 2), np.float32), {}

    def step(self, actions):
        self.t += 1
        ended = self.t >= 2 + np.arange(self.num_envs) + self.episode
        reward = np.ones(self.num_envs)
        reward[self.resetting], ended[self.resetting] = 0.0, False
        self.t[self.resetting] = 0
        self.episode += ended
        self.resetting = ended.copy()
        return np.zeros((self.num_envs, 2), np.float32), reward, ended, np.zeros(self.num_envs, bool), {}


COUNTDOWN_ID = "RlfleetTestEval/Countdown-v0"
if COUNTDOWN_ID not in gym.registry:
    gym.register(id=COUNTDOWN_ID, entry_point=SeedLengthEnv, vector_entry_point=CountdownVectorEnv)


def test_native_envs_play_one_episode_each():
    returns, lengths = evaluate(lambda obs: np.zeros(len(obs), np.int64), EnvConfig(id=COUNTDOWN_ID),
                                num_envs=1, episodes=3, seed=0)
    assert sorted(lengths) == [2, 3, 4]  # envs 0, 1, 2, first episodes; num_envs is for copies of the env
    assert returns == [float(n) for n in lengths]


def test_native_next_step_resets_are_not_counted(monkeypatch):
    """Past MAX_NATIVE_ENVS episodes, num_envs native envs play several each: the reset step between two
    episodes adds neither a step nor reward to the next one."""
    monkeypatch.setattr(episodes_module, "MAX_NATIVE_ENVS", 2)
    returns, lengths = evaluate(lambda obs: np.zeros(len(obs), np.int64), EnvConfig(id=COUNTDOWN_ID),
                                num_envs=2, episodes=6, seed=0)
    assert sorted(lengths) == sorted([2, 3, 4] + [3, 4, 5])
    assert returns == [float(n) for n in lengths]


def test_native_false_steps_copies_of_the_env():
    """The registered single env (SeedLengthEnv: lengths 2, 5 for seeds 0, 1), not the vectorized one."""
    _, lengths = evaluate(lambda obs: np.zeros(len(obs), np.int64), EnvConfig(id=COUNTDOWN_ID),
                          num_envs=2, episodes=2, seed=0, native=False)
    assert sorted(lengths) == [2, 5]


def test_greedy_cartpole_on_its_native_vector_env():
    net = random_actor(seed=3).greedy
    returns, lengths = evaluate(net, EnvConfig(id="CartPole-v1"), num_envs=10, episodes=20, seed=0)
    assert len(returns) == 20 and returns == [float(n) for n in lengths]
    assert all(1 <= n <= 500 for n in lengths)
    assert evaluate(net, EnvConfig(id="CartPole-v1"), num_envs=10, episodes=20, seed=0) == (returns, lengths)
    assert evaluate(net, EnvConfig(id="CartPole-v1"), num_envs=10, episodes=20, seed=1) != (returns, lengths)
