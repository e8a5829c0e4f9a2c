"""Env backends and double buffering give the rollout the transitions the sync backend gives: the same chunk from
the same seeds, env errors contained per column, every env stepped once per row."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.collector_worker.rollout import Chunk, Rollout
from rlfleet.collector_worker.stepping import Halves, _joined
from rlfleet.shared.config.run_config import EnvBackend, EnvConfig
from rlfleet.shared.policy.manifest import Behaviour
from tests.support.policies import CARTPOLE, EPSILON_GREEDY, SAMPLING, flat_spaces, manifest, policy_state

torch.set_num_threads(1)

CARTPOLE_TRUNCATED = EnvConfig(id="CartPole-v1", max_episode_steps=9, wrappers=[{"name": "scale_reward", "scale": 0.5}])


def chunks(env: EnvConfig, behaviour: Behaviour, backend: EnvBackend = "sync", double_buffer: bool = False,
           greedy: bool = False, num_envs: int = 4, steps: tuple[int, ...] = (30, 20)) -> list[Chunk]:
    head = behaviour.head
    m = manifest(CARTPOLE, head)
    rollout = Rollout(env, num_envs, CARTPOLE, behaviour, seed=7, greedy=greedy, backend=backend,
                      double_buffer=double_buffer)
    try:
        rollout.load_policy(m, policy_state(m, 3))
        return [rollout.collect(n, epsilon=0.0) for n in steps]
    finally:
        rollout.close()


def assert_same(a: list[Chunk], b: list[Chunk]) -> None:
    for x, y in zip(a, b, strict=True):
        assert x.arrays.keys() == y.arrays.keys()
        for key in x.arrays:
            np.testing.assert_array_equal(x.arrays[key], y.arrays[key], err_msg=key)
        assert x.episodes == y.episodes and x.fresh_columns == y.fresh_columns


def test_async_backend_collects_the_chunks_the_sync_backend_does() -> None:
    """Sampled actions with their log-probs, time-limit truncations with their final observations, the raw
    returns beneath a training-only reward scale: all as the sync backend gives them."""
    sync = chunks(CARTPOLE_TRUNCATED, SAMPLING)
    assert sync[0].arrays["truncated"].any() and sync[0].episodes
    assert_same(sync, chunks(CARTPOLE_TRUNCATED, SAMPLING, "async"))


def test_double_buffering_collects_the_chunks_one_vector_env_does() -> None:
    """Acting greedily (no random draw that the halves would take in another order), the double-buffered
    chunks are the sync backend's, 5 envs split 2 + 3: every column stepped once per row with its own action."""
    sync = chunks(CARTPOLE_TRUNCATED, EPSILON_GREEDY, greedy=True, num_envs=5)
    assert_same(sync, chunks(CARTPOLE_TRUNCATED, EPSILON_GREEDY, "async", double_buffer=True, greedy=True,
                             num_envs=5))


@pytest.mark.parametrize("double_buffer", [False, True])
def test_an_env_that_raises_in_its_subprocess_is_reset_and_counted(double_buffer: bool) -> None:
    """Step 3 of every episode raises inside the env's subprocess: that step is invalid and truncated, the broken
    episode is not reported, and the env starts over; the collector goes on."""
    env = EnvConfig(id="tests.support.userenv:CountEnv", kwargs={"length": 5, "raise_at": 3})
    rollout = Rollout(env, 2, flat_spaces(2, 2), EPSILON_GREEDY, seed=0, backend="async",
                      double_buffer=double_buffer)
    try:
        chunk = rollout.collect(6, epsilon=1.0, random=True)
    finally:
        rollout.close()
    a = chunk.arrays
    np.testing.assert_array_equal(a["valid"][:, 0], [True, True, False, True, True, False])
    assert chunk.env_errors == 4 and a["truncated"][2].all() and not chunk.episodes
    np.testing.assert_array_equal(a["obs"][3, :, 0], [0, 0])  # a fresh episode after the failed step


def test_halves_step_each_env_once_per_row_in_order() -> None:
    """CountEnv observes its own step count: after k plain steps of a Halves of 3 envs, each column counts k."""
    env = EnvConfig(id="tests.support.userenv:CountEnv", kwargs={"length": 100})
    halves = Halves(env, 3)
    try:
        obs, _ = halves.reset(seed=1)
        for k in range(1, 4):
            obs, rewards, terminated, truncated, info = halves.step(np.zeros(3, np.int64))
            np.testing.assert_array_equal(obs[:, 0], [k, k, k])
        assert obs.shape == (3, 2) and rewards.shape == (3,) and not terminated.any() and info == {}
    finally:
        halves.close()


def test_joined_infos_fill_what_one_half_lacks() -> None:
    """Only the second half's env 0 ended: the joined info has its final observation at index 2 and a mask
    that is False for the first half, as one vector env of all 4 would report it."""
    final = np.empty(2, dtype=object)
    final[0] = np.ones(3)
    b = {"final_obs": final, "_final_obs": np.array([True, False]),
         "final_info": {"episode": {"r": np.array([2.0, 0.0]), "_r": np.array([True, False])}}}
    joined = _joined({}, 2, b, 2)
    np.testing.assert_array_equal(joined["_final_obs"], [False, False, True, False])
    assert joined["final_obs"][0] is None and joined["final_obs"][2] is final[0]
    np.testing.assert_array_equal(joined["final_info"]["episode"]["r"], [0.0, 0.0, 2.0, 0.0])
    np.testing.assert_array_equal(joined["final_info"]["episode"]["_r"], [False, False, True, False])


def test_envpool_backend_gives_same_step_transitions() -> None:
    """EnvPool's CartPole under a 20-step limit: every next observation is the following row's observation
    unless the episode ended, where the final observation is kept apart and the next row starts a fresh
    episode at once (SAME_STEP, not EnvPool's own NEXT_STEP), and every episode is reported."""
    pytest.importorskip("envpool")
    env = EnvConfig(id="CartPole-v1", max_episode_steps=20)
    rollout = Rollout(env, 3, CARTPOLE, EPSILON_GREEDY, seed=5, backend="envpool")
    try:
        chunk = rollout.collect(60, epsilon=1.0, random=True)
    finally:
        rollout.close()
    a = chunk.arrays
    done = a["terminated"] | a["truncated"]
    assert done.any() and a["valid"].all()
    cont = ~done[:-1]
    np.testing.assert_array_equal(a["next_obs"][:-1][cont], a["obs"][1:][cont])
    assert np.all(np.abs(a["obs"][1:][done[:-1]]) <= 0.05)  # a fresh CartPole reset
    assert not np.array_equal(a["next_obs"][:-1][done[:-1]], a["obs"][1:][done[:-1]])
    assert len(chunk.episodes) == int(done.sum())
    assert max(length for _, length, _ in chunk.episodes) <= 20 and a["truncated"].any()
