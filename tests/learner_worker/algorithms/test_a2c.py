"""A2C update: the losses by hand, one gradient step per batch, invalid rows, state round trip, a bandit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.learner_worker.algorithms.a2c import A2C
from rlfleet.learner_worker.gae import gae
from rlfleet.shared.algorithms.a2c import A2CParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.policy.manifest import Behaviour
from tests.support.learner_data import (
    N_ACTIONS,
    OBS_DIM,
    assert_invalid_rows_ignored,
    bandit_chunk,
    make_chunk,
    params_equal,
    roundtrip,
)
from tests.support.policies import PENDULUM, SAMPLING, flat_spaces

torch.set_num_threads(1)

KEYS = {"policy_loss", "value_loss", "entropy", "explained_variance", "grad_norm"}
SMALL = A2CParams(net=NetConfig(hidden=(16, 16), activation="tanh"), entropy_coef=0.01)


def make_a2c(cfg: A2CParams = SMALL, seed: int = 0) -> A2C:
    return A2C(flat_spaces(OBS_DIM, N_ACTIONS), cfg, SAMPLING, seed=seed)


def test_losses_match_a_hand_computation_on_the_pre_update_networks():
    """n-step returns (lambda 1) from the critic, then -mean(A log pi), 0.5 mean((V - R)^2), mean entropy."""
    cfg = A2CParams(net=NetConfig(hidden=(16,), activation="tanh"), gamma=0.9, entropy_coef=0.05)
    a2c = make_a2c(cfg)
    chunk = make_chunk(5, steps=6, envs=3)
    chunk["terminated"][:] = False
    chunk["truncated"][:] = False
    chunk["terminated"][2, 1] = True
    chunk["truncated"][3, 0] = True
    final_obs = chunk["next_obs"][3, 0].copy()
    chunk["next_obs"][:-1] = chunk["obs"][1:]  # within an episode the next observation is the next row's
    chunk["next_obs"][3, 0] = final_obs  # a truncated episode's own last observation
    obs = torch.from_numpy(chunk["obs"].reshape(-1, OBS_DIM))
    with torch.no_grad():
        values = a2c.critic(torch.from_numpy(chunk["obs"])).squeeze(-1).numpy()
        next_values = a2c.critic(torch.from_numpy(chunk["next_obs"])).squeeze(-1).numpy()
        logp_all = torch.log_softmax(a2c.actor(obs), dim=1).numpy().astype(np.float64)
    # The lambda = 1 return, written out backwards per env column.
    returns = np.zeros((6, 3))
    for i in range(3):
        following = None
        for t in reversed(range(6)):
            if chunk["terminated"][t, i]:
                following = chunk["rewards"][t, i]
            elif chunk["truncated"][t, i] or following is None:
                following = chunk["rewards"][t, i] + 0.9 * next_values[t, i]
            else:
                following = chunk["rewards"][t, i] + 0.9 * following
            returns[t, i] = following
    adv = (returns - values).reshape(-1)
    logp = logp_all[np.arange(18), chunk["actions"].reshape(-1)]
    entropy = -(np.exp(logp_all) * logp_all).sum(1).mean()
    info = a2c.update([chunk])
    assert set(info) == KEYS
    assert info["policy_loss"] == pytest.approx(-(adv * logp).mean(), rel=1e-4)
    assert info["value_loss"] == pytest.approx(0.5 * np.mean((values - returns) ** 2), rel=1e-4)
    assert info["entropy"] == pytest.approx(entropy, rel=1e-5)
    assert a2c.updates == 1


def test_one_step_is_one_rmsprop_step_on_the_combined_loss():
    """The parameters move exactly as one RMSprop step on the loss computed here would move them."""
    cfg = A2CParams(net=NetConfig(hidden=(8,), activation="tanh"), entropy_coef=0.1, max_grad_norm=1e6)
    a2c, twin = make_a2c(cfg, 3), make_a2c(cfg, 3)
    chunk = make_chunk(2)
    rows = twin.gae_rows(chunk, cfg.gamma, cfg.gae_lambda)
    obs, actions = torch.from_numpy(rows["obs"]), torch.from_numpy(rows["actions"])
    logp_all = torch.log_softmax(twin.actor(obs), dim=1)
    logp = logp_all.gather(1, actions[:, None]).squeeze(1)
    entropy = -(logp_all.exp() * logp_all).sum(1).mean()
    value_loss = 0.5 * (twin.critic(obs).squeeze(1) - torch.from_numpy(rows["targets"])).pow(2).mean()
    loss = -(torch.from_numpy(rows["advantages"]) * logp).mean() + 0.5 * value_loss - 0.1 * entropy
    optimizer = torch.optim.RMSprop(twin.params, lr=cfg.learning_rate, alpha=0.99, eps=1e-5)
    loss.backward()
    optimizer.step()
    a2c.update([chunk])
    for mine, theirs in ((a2c.actor, twin.actor), (a2c.critic, twin.critic)):
        for x, y in zip(mine.parameters(), theirs.parameters(), strict=True):
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def test_gae_lambda_is_used_for_the_advantages():
    cfg = A2CParams(net=NetConfig(hidden=(8,)), gamma=0.95, gae_lambda=0.7)
    a2c = make_a2c(cfg)
    chunk = make_chunk(8, invalid=0.0)
    rows = a2c.gae_rows(chunk, cfg.gamma, cfg.gae_lambda)
    values, next_values = a2c.values(chunk["obs"]), a2c.values(chunk["next_obs"])
    adv, _ = gae(chunk["rewards"], values, next_values, chunk["terminated"],
                 chunk["terminated"] | chunk["truncated"], 0.95, 0.7)
    np.testing.assert_allclose(rows["advantages"], adv.reshape(-1), rtol=1e-5, atol=1e-6)


def test_invalid_rows_are_finite_and_do_not_influence_the_update():
    assert_invalid_rows_ignored(lambda: make_a2c(SMALL, 7))


def test_empty_batch_raises():
    a2c = make_a2c()
    chunk = make_chunk(1)
    chunk["valid"][:] = False
    with pytest.raises(ValueError, match="empty"):
        a2c.update([chunk])
    with pytest.raises(ValueError, match="empty"):
        a2c.update([])
    assert a2c.updates == 0


def test_state_load_roundtrip_reproduces_training():
    first = make_a2c(SMALL, 0)
    for step in range(3):
        first.update([make_chunk(step, invalid=0.1)])
    second = make_a2c(SMALL, 99)
    second.load(roundtrip(first.state()))
    assert second.updates == 3
    assert params_equal(first.actor, second.actor) and params_equal(first.critic, second.critic)
    for step in range(3, 6):  # RMSprop's running averages came along: identical futures
        chunks = [make_chunk(step), make_chunk(100 + step, steps=3, envs=5)]
        assert first.update(chunks) == second.update(chunks)
    assert params_equal(first.actor, second.actor) and params_equal(first.critic, second.critic)


def test_contextual_bandit_learns_the_right_action():
    cfg = A2CParams(net=NetConfig(hidden=(16,), activation="tanh"), learning_rate=1e-2)
    a2c = A2C(flat_spaces(2, 2), cfg, SAMPLING, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(60):
        a2c.update([bandit_chunk(a2c, rng)])
    with torch.no_grad():
        probs = torch.softmax(a2c.actor(torch.eye(2)), dim=1)
    assert probs[0, 0] > 0.9 and probs[1, 1] > 0.9, probs


def test_gaussian_head_learns_a_continuous_bandit():
    """Reward -(a - 0.7)^2 for Box actions: the mean moves towards 0.7."""
    cfg = A2CParams(net=NetConfig(hidden=(16,), activation="tanh"), learning_rate=3e-3, log_std_init=-0.5)
    a2c = A2C(PENDULUM, cfg, Behaviour(head="gaussian", sample=True), seed=0)
    assert a2c.actor.log_std.detach().numpy() == pytest.approx([-0.5])
    rng = np.random.default_rng(0)
    obs = np.zeros((16, 8, 3), np.float32)
    done = np.ones((16, 8), bool)
    for _ in range(200):
        actions = (a2c.actor(torch.zeros(1, 3)).detach().numpy() + rng.normal(size=(16, 8, 1))
                   * np.exp(a2c.actor.log_std.detach().numpy())).astype(np.float32)
        a2c.update([{"obs": obs, "next_obs": obs, "actions": actions, "rewards": -((actions[..., 0] - 0.7) ** 2),
                     "terminated": done, "truncated": ~done, "valid": done, "logp": np.zeros((16, 8), np.float32)}])
    with torch.no_grad():
        assert a2c.actor(torch.zeros(1, 3)).item() == pytest.approx(0.7, abs=0.15)
