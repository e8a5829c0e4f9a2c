"""n-step targets: a vectorised implementation checked against a naive per-element reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlfleet.learner_worker.nstep import nstep_targets

HYPOTHESIS = settings(max_examples=300, derandomize=True, database=None, deadline=None)


def reference(rewards, terminated, truncated, next_obs, gamma, n):
    """Per element: sum up to n rewards, stopping after a termination, a truncation, or the chunk's last step."""
    steps, envs = rewards.shape
    returns = np.zeros((steps, envs))
    boot = np.zeros(next_obs.shape)
    discount = np.zeros((steps, envs))
    for t in range(steps):
        for i in range(envs):
            total, k = 0.0, 0
            while k < n and t + k < steps:
                total += gamma**k * float(rewards[t + k, i])
                k += 1
                if terminated[t + k - 1, i] or truncated[t + k - 1, i]:
                    break
            last = t + k - 1
            returns[t, i] = total
            boot[t, i] = next_obs[last, i]
            discount[t, i] = 0.0 if terminated[last, i] else gamma**k
    return returns, boot, discount


def make_next_obs(steps: int, envs: int) -> np.ndarray:
    """next_obs[t, i] = (t, i, 7): every row identifies where it came from."""
    out = np.zeros((steps, envs, 3), np.float32)
    out[..., 0] = np.arange(steps)[:, None]
    out[..., 1] = np.arange(envs)[None, :]
    out[..., 2] = 7.0
    return out


@st.composite
def chunks(draw, n_max_relative_to_t: bool):
    steps = draw(st.integers(1, 12))
    envs = draw(st.integers(1, 3))
    n = draw(st.integers(1, min(5, steps + 1) if n_max_relative_to_t else 5))
    gamma = draw(st.floats(0.0, 1.0, allow_nan=False))
    flags = st.lists(st.booleans(), min_size=steps * envs, max_size=steps * envs)
    terminated = np.array(draw(flags), bool).reshape(steps, envs)
    truncated = np.array(draw(flags), bool).reshape(steps, envs)
    rewards = np.array(draw(st.lists(st.floats(-10, 10, width=32), min_size=steps * envs,
                                     max_size=steps * envs)), np.float32).reshape(steps, envs)
    return rewards, terminated, truncated, make_next_obs(steps, envs), gamma, n


def check_against_reference(rewards, terminated, truncated, next_obs, gamma, n):
    returns, boot_obs, discount = nstep_targets(rewards, terminated, truncated, next_obs, gamma, n)
    exp_returns, exp_boot, exp_discount = reference(rewards, terminated, truncated, next_obs, gamma, n)
    assert returns.shape == rewards.shape and returns.dtype == np.float32
    assert boot_obs.shape == next_obs.shape and boot_obs.dtype == np.float32
    assert discount.shape == rewards.shape and discount.dtype == np.float32
    np.testing.assert_allclose(returns, exp_returns, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(boot_obs, exp_boot.astype(np.float32))
    np.testing.assert_allclose(discount, exp_discount, rtol=1e-6, atol=1e-7)


@HYPOTHESIS
@given(chunks(n_max_relative_to_t=True))
def test_matches_reference(case):
    check_against_reference(*case)


@HYPOTHESIS
@given(chunks(n_max_relative_to_t=False))
def test_matches_reference_any_window_length(case):
    check_against_reference(*case)


@pytest.mark.parametrize(("steps", "n"), [(2, 4), (2, 5), (3, 5)])
def test_window_much_longer_than_chunk(steps, n):
    rewards = np.ones((steps, 1), np.float32)
    flags = np.zeros((steps, 1), bool)
    returns, _, discount = nstep_targets(rewards, flags, flags, make_next_obs(steps, 1), 0.5, n)
    # The window is shortened by the chunk end: sum of 0.5**j for j < steps - t.
    expected = [sum(0.5**j for j in range(steps - t)) for t in range(steps)]
    np.testing.assert_allclose(returns[:, 0], expected)
    np.testing.assert_allclose(discount[:, 0], [0.5 ** (steps - t) for t in range(steps)])


def test_window_one_longer_than_chunk_is_fine():
    returns, _, discount = nstep_targets(np.ones((2, 1), np.float32), np.zeros((2, 1), bool),
                                         np.zeros((2, 1), bool), make_next_obs(2, 1), 0.5, 3)
    np.testing.assert_allclose(returns[:, 0], [1.5, 1.0])
    np.testing.assert_allclose(discount[:, 0], [0.25, 0.5])


REWARDS = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
NONE = np.zeros((4, 1), bool)


def at(step: int) -> np.ndarray:
    flags = np.zeros((4, 1), bool)
    flags[step, 0] = True
    return flags


def test_no_episode_end_full_windows_and_chunk_end_shortens():
    next_obs = make_next_obs(4, 1)
    returns, boot, discount = nstep_targets(REWARDS, NONE, NONE, next_obs, 0.5, 3)
    np.testing.assert_allclose(returns[:, 0], [1 + 1 + 0.75, 2 + 1.5 + 1.0, 3 + 2.0, 4.0])
    np.testing.assert_allclose(discount[:, 0], [0.125, 0.125, 0.25, 0.5])
    # bootstrap from the last step inside the window: t + k - 1
    np.testing.assert_array_equal(boot[:, 0, 0], [2, 3, 3, 3])


def test_termination_zeroes_discount_and_stops_window():
    next_obs = make_next_obs(4, 1)
    returns, boot, discount = nstep_targets(REWARDS, at(1), NONE, next_obs, 0.5, 3)
    np.testing.assert_allclose(returns[:, 0], [1 + 1.0, 2.0, 3 + 2.0, 4.0])
    np.testing.assert_allclose(discount[:, 0], [0.0, 0.0, 0.25, 0.5])
    np.testing.assert_array_equal(boot[:2, 0, 0], [1, 1])


def test_truncation_stops_window_but_bootstraps():
    next_obs = make_next_obs(4, 1)
    returns, boot, discount = nstep_targets(REWARDS, NONE, at(1), next_obs, 0.5, 3)
    np.testing.assert_allclose(returns[:, 0], [1 + 1.0, 2.0, 3 + 2.0, 4.0])
    np.testing.assert_allclose(discount[:, 0], [0.25, 0.5, 0.25, 0.5])
    # the final observation of the truncated episode, not the next episode's first state
    np.testing.assert_array_equal(boot[:, 0, 0], [1, 1, 3, 3])


def test_terminated_and_truncated_same_step_counts_as_termination():
    _, _, discount = nstep_targets(REWARDS, at(2), at(2), make_next_obs(4, 1), 0.5, 2)
    np.testing.assert_allclose(discount[:, 0], [0.25, 0.0, 0.0, 0.5])


def test_end_at_first_step_of_window():
    returns, _, discount = nstep_targets(REWARDS, at(0), NONE, make_next_obs(4, 1), 0.9, 4)
    assert returns[0, 0] == pytest.approx(1.0)
    assert discount[0, 0] == 0.0


def test_n_equal_one_is_one_step_td():
    rng = np.random.default_rng(3)
    rewards = rng.normal(size=(6, 2)).astype(np.float32)
    term = rng.random((6, 2)) < 0.3
    trunc = rng.random((6, 2)) < 0.3
    next_obs = make_next_obs(6, 2)
    returns, boot, discount = nstep_targets(rewards, term, trunc, next_obs, 0.9, 1)
    np.testing.assert_array_equal(returns, rewards)
    np.testing.assert_array_equal(boot, next_obs)
    np.testing.assert_allclose(discount, np.where(term, 0.0, 0.9))


def test_envs_are_independent_columns():
    rewards = np.ones((3, 2), np.float32)
    term = np.array([[True, False], [False, False], [False, False]])
    next_obs = make_next_obs(3, 2)
    returns, boot, discount = nstep_targets(rewards, term, np.zeros_like(term), next_obs, 0.5, 3)
    np.testing.assert_allclose(returns[0], [1.0, 1.75])
    np.testing.assert_allclose(discount[0], [0.0, 0.125])
    np.testing.assert_array_equal(boot[0, :, :2], [[0, 0], [2, 1]])
