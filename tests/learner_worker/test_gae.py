"""GAE: the vectorised backward pass against a plain per-env loop, and the bootstrapping / cutting rules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlfleet.learner_worker.gae import gae

HYPOTHESIS = settings(max_examples=300, derandomize=True, database=None, deadline=None)


def reference(rewards, values, next_values, terminated, ends, gamma, lam):
    """One env at a time, one step at a time, straight from the definition."""
    steps, envs = rewards.shape
    adv = np.zeros((steps, envs))
    for i in range(envs):
        following = 0.0
        for t in reversed(range(steps)):
            bootstrap = 0.0 if terminated[t, i] else gamma * float(next_values[t, i])
            delta = float(rewards[t, i]) + bootstrap - float(values[t, i])
            last = t == steps - 1 or bool(ends[t, i])
            adv[t, i] = delta if last else delta + gamma * lam * following
            following = adv[t, i]
    return adv, adv + values


@st.composite
def chunks(draw):
    steps, envs = draw(st.integers(1, 10)), draw(st.integers(1, 4))
    size = steps * envs
    floats = st.lists(st.floats(-10, 10, width=32), min_size=size, max_size=size)
    flags = st.lists(st.booleans(), min_size=size, max_size=size)

    def arr(strategy, dtype):
        return np.array(draw(strategy), dtype).reshape(steps, envs)

    terminated = arr(flags, bool)
    ends = arr(flags, bool) | terminated  # a termination always ends the episode
    gamma = draw(st.floats(0.0, 1.0))
    lam = draw(st.floats(0.0, 1.0))
    return (arr(floats, np.float32), arr(floats, np.float32), arr(floats, np.float32), terminated, ends,
            gamma, lam)


@HYPOTHESIS
@given(chunks())
def test_matches_reference(case):
    advantages, targets = gae(*case)
    exp_adv, exp_targets = reference(*case)
    assert advantages.dtype == np.float32 and targets.dtype == np.float32
    assert advantages.shape == targets.shape == case[0].shape
    np.testing.assert_allclose(advantages, exp_adv, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(targets, exp_targets, rtol=1e-5, atol=1e-4)


def test_terminated_does_not_bootstrap_truncated_does():
    rewards, values, next_values = np.array([[1.0, 1.0]]), np.array([[0.5, 0.5]]), np.array([[10.0, 10.0]])
    terminated = np.array([[True, False]])
    ends = np.array([[True, True]])  # column 1 is truncated: an end that still bootstraps
    advantages, targets = gae(rewards, values, next_values, terminated, ends, gamma=0.9, lam=0.95)
    np.testing.assert_allclose(advantages[0], [1.0 - 0.5, 1.0 + 9.0 - 0.5])
    np.testing.assert_allclose(targets[0], [1.0, 10.0])


def test_truncation_mid_chunk_bootstraps_from_final_obs_and_stops_recursion():
    # step 1 of 3 is truncated: its next value is the final observation's, and step 2 is a new episode
    rewards = np.ones((3, 1))
    values = np.zeros((3, 1))
    next_values = np.array([[0.0], [5.0], [7.0]])
    terminated = np.zeros((3, 1), bool)
    ends = np.array([[False], [True], [False]])
    advantages, _ = gae(rewards, values, next_values, terminated, ends, gamma=0.5, lam=1.0)
    np.testing.assert_allclose(advantages[:, 0], [1.0 + 0.5 * (1.0 + 0.5 * 5.0), 1.0 + 0.5 * 5.0, 1.0 + 0.5 * 7.0])


def test_lambda_one_is_monte_carlo_return_to_go_minus_value():
    rng = np.random.default_rng(0)
    steps, gamma = 7, 0.9
    rewards = rng.normal(size=(steps, 2)).astype(np.float32)
    values = rng.normal(size=(steps, 2)).astype(np.float32)
    # inside an episode next_obs[t] is obs[t + 1], so next_values[t] = values[t + 1]; with lambda = 1 these
    # bootstraps telescope away and only the chunk's last next value (column 1) survives
    next_values = np.concatenate([values[1:], rng.normal(size=(1, 2)).astype(np.float32)])
    terminated = np.zeros((steps, 2), bool)
    terminated[-1, 0] = True  # column 0: one episode that terminates at the chunk's last step
    advantages, targets = gae(rewards, values, next_values, terminated, terminated.copy(), gamma, lam=1.0)
    for t in range(steps):
        to_go = sum(gamma**k * rewards[t + k, 0] for k in range(steps - t))
        assert advantages[t, 0] == pytest.approx(to_go - values[t, 0], rel=1e-4, abs=1e-4)
        assert targets[t, 0] == pytest.approx(to_go, rel=1e-4, abs=1e-4)
        # column 1 runs past the chunk: the return to go plus the bootstrap from the last next value
        to_go_boot = sum(gamma**k * rewards[t + k, 1] for k in range(steps - t))
        to_go_boot += gamma ** (steps - t) * next_values[-1, 1]
        assert advantages[t, 1] == pytest.approx(to_go_boot - values[t, 1], rel=1e-4, abs=1e-4)


def test_lambda_zero_is_one_step_td_error():
    rng = np.random.default_rng(1)
    rewards, values, next_values = (rng.normal(size=(5, 3)) for _ in range(3))
    terminated = rng.random((5, 3)) < 0.3
    advantages, _ = gae(rewards, values, next_values, terminated, terminated, gamma=0.8, lam=0.0)
    np.testing.assert_allclose(advantages, rewards + 0.8 * np.where(terminated, 0, next_values) - values, rtol=1e-5)


def test_ends_cut_the_recursion():
    rng = np.random.default_rng(2)
    rewards, values, next_values = (rng.normal(size=(6, 1)).astype(np.float32) for _ in range(3))
    terminated = np.zeros((6, 1), bool)
    ends = np.zeros((6, 1), bool)
    ends[2] = True  # a cut that is neither a termination nor a truncation (e.g. before an invalid step)
    before, _ = gae(rewards, values, next_values, terminated, ends, 0.99, 0.9)
    later = rewards.copy()
    later[3:] += 100.0
    changed, _ = gae(later, values, next_values, terminated, ends, 0.99, 0.9)
    np.testing.assert_array_equal(before[:3], changed[:3])  # nothing after the cut reaches back
    assert (changed[3:] != before[3:]).all()
    # the cut step is its own TD error, still bootstrapped
    assert before[2, 0] == pytest.approx(rewards[2, 0] + 0.99 * next_values[2, 0] - values[2, 0], rel=1e-5)
    # without the cut the change does reach back
    uncut, _ = gae(later, values, next_values, terminated, np.zeros_like(ends), 0.99, 0.9)
    assert (uncut[:3] != before[:3]).all()


def test_envs_are_independent_columns():
    rng = np.random.default_rng(3)
    rewards, values, next_values = (rng.normal(size=(4, 3)) for _ in range(3))
    terminated = rng.random((4, 3)) < 0.3
    ends = terminated | (rng.random((4, 3)) < 0.3)
    together, _ = gae(rewards, values, next_values, terminated, ends, 0.9, 0.8)
    for i in range(3):
        alone, _ = gae(rewards[:, i:i + 1], values[:, i:i + 1], next_values[:, i:i + 1], terminated[:, i:i + 1],
                       ends[:, i:i + 1], 0.9, 0.8)
        np.testing.assert_array_equal(together[:, i:i + 1], alone)


def test_shape_mismatch_raises():
    ones = np.ones((3, 2))
    with pytest.raises(ValueError, match="next_values"):
        gae(ones, ones, np.ones((3, 1)), ones.astype(bool), ones.astype(bool), 0.9, 0.9)
