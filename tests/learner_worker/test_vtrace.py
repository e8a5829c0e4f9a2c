"""V-trace: a small example worked by hand, the on-policy reduction to n-step/GAE returns, truncation of the
importance weights at rho_bar and c_bar, and episode ends (termination, truncation, cuts)."""

from __future__ import annotations

import numpy as np
import pytest

from rlfleet.learner_worker.gae import gae
from rlfleet.learner_worker.vtrace import vtrace


def column(*values: float) -> np.ndarray:
    """A [T, 1] array: one env."""
    return np.array(values, np.float64)[:, None]


NO = column(0, 0, 0).astype(bool)


def test_a_three_step_example_worked_by_hand():
    """gamma 0.9, ratios pi/mu = (2, 0.5, 1.2), rho_bar 1.5, c_bar 1, one episode going on past the chunk.

    rho = (min(1.5, 2), 0.5, 1.2) = (1.5, 0.5, 1.2);  c = (min(1, 2), 0.5, min(1, 1.2)) = (1, 0.5, 1)
    V(obs) = (0.5, 1, 2), V(next_obs) = (1, 2, 3) (the last one is the bootstrap), r = (1, 2, -1)
    delta_0 = 1.5 * (1 + 0.9 * 1 - 0.5)  =  2.1
    delta_1 = 0.5 * (2 + 0.9 * 2 - 1)    =  1.4
    delta_2 = 1.2 * (-1 + 0.9 * 3 - 2)   = -0.36
    v_2 - V_2 = -0.36                                    -> v_2 = 1.64
    v_1 - V_1 = 1.4 + 0.9 * 0.5 * (-0.36) = 1.238      -> v_1 = 2.238
    v_0 - V_0 = 2.1 + 0.9 * 1 * 1.238     = 3.2142     -> v_0 = 3.7142
    A_0 = 1.5 * (1 + 0.9 * v_1 - 0.5)  = 1.5 * 2.5142 = 3.7713
    A_1 = 0.5 * (2 + 0.9 * v_2 - 1)    = 0.5 * 2.476  = 1.238
    A_2 = 1.2 * (-1 + 0.9 * 3 - 2)                    = -0.36   (the chunk's end: bootstraps from V(next_obs))
    """
    targets, advantages = vtrace(
        behaviour_logp=np.log(column(0.25, 0.5, 0.5)), target_logp=np.log(column(0.5, 0.25, 0.6)),
        rewards=column(1, 2, -1), values=column(0.5, 1, 2), next_values=column(1, 2, 3), terminated=NO, ends=NO,
        gamma=0.9, rho_bar=1.5, c_bar=1.0)
    np.testing.assert_allclose(targets[:, 0], [3.7142, 2.238, 1.64], rtol=1e-12)
    np.testing.assert_allclose(advantages[:, 0], [3.7713, 1.238, -0.36], rtol=1e-12)
    # The paper's closed form for v_0: V_0 + sum_t gamma^t (c_0 ... c_{t-1}) delta_t
    assert targets[0, 0] == pytest.approx(0.5 + 2.1 + 0.9 * 1.0 * 1.4 + 0.81 * 1.0 * 0.5 * -0.36, rel=1e-12)


def random_chunk(seed: int, steps: int = 12, envs: int = 5) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = (steps, envs)
    terminated = rng.random(shape) < 0.15
    truncated = ~terminated & (rng.random(shape) < 0.1)
    cut = rng.random(shape) < 0.05  # e.g. an invalid step or the step before one
    ends = terminated | truncated | cut
    values, next_values = rng.normal(size=shape), rng.normal(size=shape)
    next_values[:-1] = np.where(ends[:-1], next_values[:-1], values[1:])  # next_obs_t is obs_t+1 within an episode
    return {"rewards": rng.normal(size=shape), "values": values, "next_values": next_values,
            "terminated": terminated, "ends": ends, "logp": np.log(rng.uniform(0.05, 1.0, shape))}


@pytest.mark.parametrize("seed", range(5))
def test_on_policy_it_reduces_to_n_step_returns(seed):
    """pi = mu: every rho and c is 1 (not clipped at bars of 1), v is the return to the episode's or chunk's
    end bootstrapped there (GAE's lambda = 1 target), A the lambda = 1 advantage."""
    c = random_chunk(seed)
    targets, advantages = vtrace(c["logp"], c["logp"], c["rewards"], c["values"], c["next_values"], c["terminated"],
                                 c["ends"], gamma=0.97)
    gae_adv, gae_targets = gae(c["rewards"], c["values"], c["next_values"], c["terminated"], c["ends"], 0.97, 1.0)
    np.testing.assert_allclose(targets, gae_targets, rtol=1e-5, atol=1e-5)  # gae returns float32
    np.testing.assert_allclose(advantages, gae_adv, rtol=1e-5, atol=1e-5)


def test_on_policy_with_lambda_the_targets_are_td_lambda_returns():
    c = random_chunk(7)
    targets, _ = vtrace(c["logp"], c["logp"], c["rewards"], c["values"], c["next_values"], c["terminated"],
                        c["ends"], gamma=0.9, lam=0.8)
    _, gae_targets = gae(c["rewards"], c["values"], c["next_values"], c["terminated"], c["ends"], 0.9, 0.8)
    np.testing.assert_allclose(targets, gae_targets, rtol=1e-5, atol=1e-5)


def test_n_step_return_of_one_column_written_out():
    """r = (1, 1, 1), gamma 0.5, bootstrap V = 8 after the last step: v_0 = 1 + 0.5 + 0.25 + 0.125 * 8 = 2.75."""
    logp = np.log(column(0.3, 0.6, 0.9))
    targets, advantages = vtrace(logp, logp, column(1, 1, 1), column(0, 0, 0), column(0, 0, 8), NO, NO, gamma=0.5)
    np.testing.assert_allclose(targets[:, 0], [2.75, 3.5, 5.0])
    np.testing.assert_allclose(advantages[:, 0], [2.75, 3.5, 5.0])  # V = 0 everywhere


def test_importance_weights_are_truncated_at_rho_bar_and_c_bar():
    c = random_chunk(3)
    on = vtrace(c["logp"], c["logp"], c["rewards"], c["values"], c["next_values"], c["terminated"], c["ends"], 0.95)
    # Every ratio 3: clipped to 1 by both bars, exactly the on-policy result.
    far = vtrace(c["logp"], c["logp"] + np.log(3.0), c["rewards"], c["values"], c["next_values"], c["terminated"],
                 c["ends"], 0.95, rho_bar=1.0, c_bar=1.0)
    np.testing.assert_allclose(far[0], on[0], rtol=1e-12)
    np.testing.assert_allclose(far[1], on[1], rtol=1e-12)
    # Absurd ratios (e^1000, e^-1000) stay finite: clipped above, ~0 below.
    wild = vtrace(c["logp"], c["logp"] + np.where(c["rewards"] > 0, 1000.0, -1000.0), c["rewards"], c["values"],
                  c["next_values"], c["terminated"], c["ends"], 0.95)
    assert np.isfinite(wild[0]).all() and np.isfinite(wild[1]).all()


def test_rho_bar_and_c_bar_act_separately_worked_by_hand():
    """Two steps, ratios (4, 4), gamma 1, rho_bar 2, c_bar 0.5: rho = 2, c = 0.5.
    delta = 2 * (r + V(next) - V) = 2 * (1 + 1 - 0) = 4 for both steps (V(obs) = 0, V(next_obs) = 1)
    v_1 = 0 + 4 = 4;  v_0 = 0 + 4 + 1 * 0.5 * 4 = 6;  A_0 = 2 * (1 + v_1 - 0) = 10;  A_1 = 2 * (1 + 1) = 4"""
    behaviour, target = np.log(column(0.2, 0.2)), np.log(column(0.8, 0.8))
    no = column(0, 0).astype(bool)
    targets, advantages = vtrace(behaviour, target, column(1, 1), column(0, 0), column(1, 1), no, no, gamma=1.0,
                                 rho_bar=2.0, c_bar=0.5)
    np.testing.assert_allclose(targets[:, 0], [6.0, 4.0])
    np.testing.assert_allclose(advantages[:, 0], [10.0, 4.0])
    # Ratios below both bars are used as they are: rho = c = 0.25
    targets, advantages = vtrace(target, behaviour, column(1, 1), column(0, 0), column(1, 1), no, no, gamma=1.0,
                                 rho_bar=2.0, c_bar=0.5)
    np.testing.assert_allclose(targets[:, 0], [0.5 + 0.25 * 0.5, 0.5])
    np.testing.assert_allclose(advantages[:, 0], [0.25 * (1 + 0.5), 0.25 * 2])


def test_terminated_does_not_bootstrap_and_truncated_bootstraps_from_next_obs():
    """Step 0 ends the episode; step 1 is the next episode and must not reach back into step 0."""
    logp_b, logp_t = np.log(column(0.5, 0.5)), np.log(column(0.4, 0.6))  # rho = c = (0.8, 1.0) with bars of 1
    rewards, values, next_values = column(1.0, 2.0), column(0.5, 3.0), column(10.0, 4.0)
    ended = column(1, 0).astype(bool)
    no = column(0, 0).astype(bool)
    # terminated: v_0 = V_0 + 0.8 * (r_0 - V_0) = 0.9; A_0 = 0.8 * (r_0 - V_0) = 0.4
    targets, advantages = vtrace(logp_b, logp_t, rewards, values, next_values, ended, ended, gamma=0.9)
    np.testing.assert_allclose([targets[0, 0], advantages[0, 0]], [0.9, 0.4])
    # truncated: bootstraps from V(next_obs_0) = 10 (the final observation), not from step 1's values:
    # v_0 = 0.5 + 0.8 * (1 + 0.9 * 10 - 0.5) = 8.1 = V_0 + A_0
    targets, advantages = vtrace(logp_b, logp_t, rewards, values, next_values, no, ended, gamma=0.9)
    np.testing.assert_allclose([targets[0, 0], advantages[0, 0]], [8.1, 7.6])
    # the step after the end: its own one-step target, bootstrapped at the chunk's end
    np.testing.assert_allclose(targets[1, 0], 3.0 + 1.0 * (2.0 + 0.9 * 4.0 - 3.0))


def test_rows_after_an_end_do_not_change_the_rows_before_it():
    c = random_chunk(11, steps=6, envs=1)
    ends = np.zeros((6, 1), bool)
    ends[2] = True
    base = vtrace(c["logp"], c["logp"] + 0.3, c["rewards"], c["values"], c["next_values"], c["terminated"], ends, 0.9)
    changed = {k: v.copy() for k, v in c.items()}
    for key in ("rewards", "values", "next_values", "logp"):
        changed[key][3:] = 123.0
    after = vtrace(changed["logp"], changed["logp"] + 0.3, changed["rewards"], changed["values"],
                   changed["next_values"], c["terminated"], ends, 0.9)
    np.testing.assert_allclose(after[0][:3], base[0][:3])
    np.testing.assert_allclose(after[1][:3], base[1][:3])


def test_columns_are_independent_envs():
    c = random_chunk(5, envs=3)
    both = vtrace(c["logp"], c["logp"] - 0.2, c["rewards"], c["values"], c["next_values"], c["terminated"],
                  c["ends"], 0.9, rho_bar=1.2, c_bar=0.9)
    for i in range(3):
        one = vtrace(*(a[:, i:i + 1] for a in (c["logp"], c["logp"] - 0.2, c["rewards"], c["values"],
                                                 c["next_values"], c["terminated"], c["ends"])), 0.9, 1.2, 0.9)
        np.testing.assert_allclose(both[0][:, i:i + 1], one[0])
        np.testing.assert_allclose(both[1][:, i:i + 1], one[1])


def test_shapes_and_bars_are_checked():
    c = random_chunk(0)
    with pytest.raises(ValueError, match="values has shape"):
        vtrace(c["logp"], c["logp"], c["rewards"], c["values"][:-1], c["next_values"], c["terminated"], c["ends"], 0.9)
    with pytest.raises(ValueError, match=r"\[T, N\]"):
        vtrace(*(np.zeros(3),) * 5, np.zeros(3, bool), np.zeros(3, bool), 0.9)
    with pytest.raises(ValueError, match="rho_bar"):
        vtrace(c["logp"], c["logp"], c["rewards"], c["values"], c["next_values"], c["terminated"], c["ends"], 0.9,
               rho_bar=0.0)
