"""evaluate(): exactly `episodes` episodes, split evenly over the envs, played greedily."""

from __future__ import annotations

from collections import Counter

import gymnasium as gym
import numpy as np
import pytest
import torch

from evaluator.episodes import Act, evaluate
from shared.config import EnvConfig
from tests.policies import flat_spaces, random_actor

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
    """Each env's first episode equals a single-env greedy rollout with the same seed."""
    net = random_actor(seed=4).greedy
    returns, lengths = evaluate(net, EnvConfig(id="CartPole-v1"), num_envs=2, episodes=2, seed=10)
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
