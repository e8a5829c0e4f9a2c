"""collector_worker/members.py: a member is the published policy moved along its noise-table slice, played
greedily on the coordinator's seeds; its outcome equals playing that policy by hand, and repeats exactly."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from collector_worker.members import MemberEvaluator
from shared.actors import NumpyActor
from shared.config import EnvConfig
from shared.flat_params import flatten, policy_shapes, unflatten
from shared.noise_table import NoiseTable
from shared.policy_io import save_policy
from shared.store import LocalStore
from shared.wire_base import PolicyRef
from shared.wire_generations import MemberTask, Perturbation
from tests.policies import CARTPOLE, manifest, policy_state

torch.set_num_threads(1)
NOISE_SEED, NOISE_SIZE, SIGMA = 11, 4096, 0.5
SEED = 123_456


@pytest.fixture
def published(tmp_path: Path) -> tuple[LocalStore, PolicyRef, dict[str, np.ndarray]]:
    store = LocalStore(tmp_path / "store")
    m = manifest(CARTPOLE, "categorical", (16,))
    state = policy_state(m, seed=2)
    ref = save_policy(store, 1, {k: torch.from_numpy(v) for k, v in state.items()}, m)
    return store, ref, state


def member(ref: PolicyRef, noise_index: int, sign: int, episodes: int = 3, max_steps: int | None = None) -> MemberTask:
    return MemberTask(generation=1, member=0, policy=ref, noise_index=noise_index, sign=sign, seed=SEED,
                      perturbation=Perturbation(noise_seed=NOISE_SEED, noise_size=NOISE_SIZE, sigma=SIGMA,
                                                episodes=episodes, max_steps=max_steps))


def by_hand(state: dict[str, np.ndarray], noise_index: int, sign: int, episodes: int) -> tuple[list[float], list[int]]:
    """Each episode played one at a time with the perturbed policy, built here from its own noise table."""
    m = manifest(CARTPOLE, "categorical", (16,))
    shapes = policy_shapes(m)
    theta = flatten(state, shapes)
    eps = NoiseTable(NOISE_SEED, NOISE_SIZE).noise[noise_index:noise_index + theta.size]
    actor = NumpyActor(m, unflatten(theta + sign * SIGMA * eps, shapes))
    returns, lengths = [], []
    for i in range(episodes):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=SEED + i)
        total, steps, done = 0.0, 0, False
        while not done:
            action = int(np.argmax(actor.forward(obs[None])[0]))
            obs, reward, terminated, truncated, _ = env.step(action)
            total, steps, done = total + float(reward), steps + 1, terminated or truncated
        env.close()
        returns.append(total)
        lengths.append(steps)
    return returns, lengths


def test_member_outcome_equals_playing_the_perturbed_policy_by_hand(published) -> None:
    store, ref, state = published
    evaluator = MemberEvaluator(EnvConfig(id="CartPole-v1"), store)
    try:
        outcomes = {}
        for sign in (1, -1):
            returns, lengths = by_hand(state, 37, sign, episodes=3)
            outcome = evaluator.evaluate(member(ref, 37, sign))
            assert outcome.mean_return == pytest.approx(np.mean(returns))
            assert outcome.mean_length == pytest.approx(np.mean(lengths))
            assert (outcome.episodes, outcome.env_steps) == (3, sum(lengths))
            outcomes[sign] = returns
        assert outcomes[1] != outcomes[-1]  # the sign matters: the antithetic pair plays different policies
    finally:
        evaluator.close()


def test_max_steps_caps_the_members_env_steps(published) -> None:
    store, ref, state = published
    _, lengths = by_hand(state, 5, 1, episodes=2)
    cap = sum(lengths) - 3
    evaluator = MemberEvaluator(EnvConfig(id="CartPole-v1"), store)
    try:
        outcome = evaluator.evaluate(member(ref, 5, 1, episodes=2, max_steps=cap))
        assert outcome.env_steps == cap
        assert outcome.episodes < 2
        full = evaluator.evaluate(member(ref, 5, 1, episodes=2))
        assert (full.env_steps, full.episodes) == (sum(lengths), 2)
    finally:
        evaluator.close()


def test_the_same_member_twice_gives_the_same_outcome(published) -> None:
    store, ref, _ = published
    first = MemberEvaluator(EnvConfig(id="CartPole-v1"), store)
    second = MemberEvaluator(EnvConfig(id="CartPole-v1"), store)
    try:
        task = member(ref, 900, -1, episodes=4)
        outcome = first.evaluate(task)
        assert first.evaluate(task) == outcome  # envs reused across members
        assert second.evaluate(task) == outcome  # another collector
        obs = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
        np.testing.assert_array_equal(first.actor(task).forward(obs), second.actor(task).forward(obs))
        assert not np.allclose(first.actor(member(ref, 901, -1)).forward(obs), first.actor(task).forward(obs))
    finally:
        first.close()
        second.close()
