"""PPO update: reported metrics, invalid rows, state round trip, learning a bandit, clipping, CartPole end to end."""

from __future__ import annotations

import time
from collections.abc import Callable

import gymnasium
import numpy as np
import pytest
import torch

from rlfleet.learner_worker.algorithms.ppo import PPO
from rlfleet.shared.algorithms.ppo import PPOParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.values import CriticValue, Support
from rlfleet.shared.policy.actors import build_actor
from rlfleet.shared.policy.manifest import Behaviour
from rlfleet.shared.policy.nets import PolicyNet
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

KEYS = {"policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "explained_variance", "grad_norm"}
SMALL = PPOParams(net=NetConfig(hidden=(16, 16), activation="tanh"), epochs=3, minibatch_size=16)


def make_ppo(cfg: PPOParams = SMALL, seed: int = 0) -> PPO:
    return PPO(flat_spaces(OBS_DIM, N_ACTIONS), cfg, SAMPLING, seed=seed)


def test_update_returns_finite_metrics():
    ppo = make_ppo(SMALL, 0)
    info = ppo.update([make_chunk(1), make_chunk(2, steps=5, envs=3)])  # chunks may differ in T and N
    assert set(info) == KEYS
    assert all(isinstance(v, float) and np.isfinite(v) for v in info.values()), info
    assert info["grad_norm"] > 0 and info["value_loss"] > 0
    assert 0 < info["entropy"] <= np.log(N_ACTIONS) + 1e-6
    assert 0 <= info["clip_fraction"] <= 1
    assert ppo.updates == 1


def test_empty_batch_raises():
    ppo = make_ppo(SMALL, 0)
    with pytest.raises(ValueError, match="empty"):
        ppo.update([])
    chunk = make_chunk(1)
    chunk["valid"][:] = False
    with pytest.raises(ValueError, match="empty"):
        ppo.update([chunk])
    assert ppo.updates == 0


def test_single_valid_row_and_leftover_row_are_finite():
    ppo = make_ppo(SMALL, 0)
    chunk = make_chunk(1)
    chunk["valid"][:] = False
    chunk["valid"][3, 1] = True
    assert all(np.isfinite(v) for v in ppo.update([chunk]).values())
    # 17 rows with minibatch 16: the single leftover row joins the previous minibatch
    assert all(np.isfinite(v) for v in ppo.update([make_chunk(2, steps=17, envs=1)]).values())


def test_invalid_rows_do_not_influence_the_update():
    assert_invalid_rows_ignored(lambda: make_ppo(SMALL, 7))


def test_an_invalid_step_cuts_the_advantage_of_the_step_before():
    """With lambda = 1 and no episode end, the advantage of step 0 would sum the rewards after it; an invalid
    step 2 must stop that sum at step 1 (bootstrapping from step 1's next observation) whatever step 2 holds."""
    cfg = PPOParams(net=NetConfig(hidden=(8,)), gamma=0.9, gae_lambda=1.0)
    ppo = make_ppo(cfg, 0)
    chunk = make_chunk(3, steps=4, envs=1)
    chunk["terminated"][:] = False
    chunk["truncated"][:] = False
    chunk["valid"][:] = True
    chunk["valid"][2] = False
    rows = ppo.gae_rows(chunk, ppo.cfg.gamma, ppo.cfg.gae_lambda)
    with torch.no_grad():
        v = ppo.critic(torch.from_numpy(chunk["obs"][:, 0])).squeeze(1).numpy()
        nv = ppo.critic(torch.from_numpy(chunk["next_obs"][:, 0])).squeeze(1).numpy()
    r = chunk["rewards"][:, 0]
    delta = r + 0.9 * nv - v
    expected = [delta[0] + 0.9 * delta[1], delta[1], delta[3]]  # step 2 dropped, step 1 cut, step 3 the chunk end
    np.testing.assert_allclose(rows["advantages"], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rows["targets"], np.array(expected) + v[[0, 1, 3]], rtol=1e-5, atol=1e-5)


def test_policy_state_loads_into_policy_network():
    cfg = PPOParams(net=NetConfig(hidden=(32, 16), activation="tanh"))
    ppo = make_ppo(cfg, 0)
    net = PolicyNet(ppo.manifest())
    net.load_state_dict(roundtrip(ppo.policy_state()))
    probe = torch.from_numpy(make_chunk(9)["obs"].reshape(-1, OBS_DIM))
    with torch.no_grad():
        assert torch.equal(net(probe), ppo.actor(probe))


def test_state_load_roundtrip_reproduces_training():
    cfg = PPOParams(net=NetConfig(hidden=(16, 16), activation="tanh"), epochs=2, minibatch_size=8,
                    learning_rate=3e-3, entropy_coef=0.01)
    first = make_ppo(cfg, 0)
    for step in range(3):
        first.update([make_chunk(step, invalid=0.1)])
    saved = roundtrip(first.state())
    assert saved["updates"] == 3

    second = make_ppo(cfg, 99)
    assert not params_equal(first.actor, second.actor)
    second.load(saved)
    assert second.updates == 3
    assert params_equal(first.actor, second.actor) and params_equal(first.critic, second.critic)
    # identical state -> identical futures (Adam moments and the shuffling stream included)
    for step in range(3, 7):
        chunks = [make_chunk(step, invalid=0.1), make_chunk(100 + step, steps=3, envs=5)]
        assert first.update(chunks) == second.update(chunks)
    assert params_equal(first.actor, second.actor) and params_equal(first.critic, second.critic)


def test_contextual_bandit_learns_the_right_action():
    cfg = PPOParams(net=NetConfig(hidden=(16,), activation="tanh"), epochs=4, minibatch_size=32, learning_rate=3e-3)
    ppo = PPO(flat_spaces(2, 2), cfg, SAMPLING, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(20):
        ppo.update([bandit_chunk(ppo, rng)])
    with torch.no_grad():
        probs = torch.softmax(ppo.actor(torch.eye(2)), dim=1)
    assert probs[0, 0] > 0.9 and probs[1, 1] > 0.9, probs


def test_ratio_clipping_is_reported():
    ppo = make_ppo(SMALL, 0)
    chunk = make_chunk(4)
    with torch.no_grad():
        logp_all = torch.log_softmax(ppo.actor(torch.from_numpy(chunk["obs"])), dim=-1)
    on_policy = logp_all.gather(-1, torch.from_numpy(chunk["actions"])[..., None]).squeeze(-1).numpy()
    near = ppo.update([{**chunk, "logp": on_policy}])
    ppo = make_ppo(SMALL, 0)
    shift = np.where(np.random.default_rng(0).random(on_policy.shape) < 0.5, -2.0, 2.0).astype(np.float32)
    far = ppo.update([{**chunk, "logp": on_policy + shift}])  # ratios of e**2 and e**-2: far outside 1 +- 0.2
    assert far["clip_fraction"] > 0.9
    assert far["approx_kl"] > 10 * near["approx_kl"]
    assert all(np.isfinite(v) for v in far.values())
    # logp_old absurdly far away: the update stays finite
    ppo = make_ppo(SMALL, 0)
    extreme = ppo.update([{**chunk, "logp": on_policy - 500.0}])
    assert extreme["clip_fraction"] == 1.0 and all(np.isfinite(v) for v in extreme.values())


def test_losses_match_the_clipped_surrogate_by_hand():
    """One epoch of one minibatch: the reported losses are those of the pre-update nets, computed here by hand."""
    cfg = PPOParams(net=NetConfig(hidden=(16,), activation="tanh"), epochs=1, minibatch_size=1024, clip_range=0.2)
    ppo = make_ppo(cfg, 0)
    chunk = make_chunk(5, steps=16, envs=4, invalid=0.2)
    chunk["logp"] = np.log(np.random.default_rng(1).uniform(0.05, 0.9, chunk["logp"].shape)).astype(np.float32)
    rows = ppo.gae_rows(chunk, ppo.cfg.gamma, ppo.cfg.gae_lambda)
    with torch.no_grad():
        logp_all = torch.log_softmax(ppo.actor(torch.from_numpy(rows["obs"])), dim=1).numpy().astype(np.float64)
        values = ppo.critic(torch.from_numpy(rows["obs"])).squeeze(1).numpy()
    ratio = np.exp(logp_all[np.arange(len(rows["actions"])), rows["actions"]] - rows["logp"])
    adv = (rows["advantages"] - rows["advantages"].mean()) / (rows["advantages"].std() + 1e-8)
    clipped = -np.minimum(ratio * adv, np.clip(ratio, 0.8, 1.2) * adv).mean()
    unclipped = -(ratio * adv).mean()
    assert abs(clipped - unclipped) > 1e-2  # the clip matters for this batch, or this test could not fail
    info = ppo.update([chunk])
    assert info["policy_loss"] == pytest.approx(clipped, rel=1e-4)
    assert info["value_loss"] == pytest.approx(0.5 * np.mean((values - rows["targets"]) ** 2), rel=1e-4)
    assert info["entropy"] == pytest.approx(-(np.exp(logp_all) * logp_all).sum(1).mean(), rel=1e-4)
    assert info["clip_fraction"] == pytest.approx(np.mean(np.abs(ratio - 1) > 0.2), abs=1e-6)
    assert info["approx_kl"] == pytest.approx(np.mean(ratio - 1 - np.log(ratio)), rel=1e-4)


# ---------------------------------------------------------------------------------------------- end to end


def make_env(num_envs: int) -> gymnasium.vector.SyncVectorEnv:
    return gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1") for _ in range(num_envs)],
                                          autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)


def greedy_score(actor: torch.nn.Module, episodes: int, seed: int) -> float:
    """Mean return of argmax(logits) over `episodes` episodes, one per env."""
    env = make_env(episodes)
    obs, _ = env.reset(seed=seed)
    returns, alive = np.zeros(episodes), np.ones(episodes, bool)
    while alive.any():
        with torch.no_grad():
            actions = actor(torch.as_tensor(obs, dtype=torch.float32)).argmax(1).numpy()
        obs, rew, term, trunc, _ = env.step(actions)
        returns += rew * alive
        alive &= ~(term | trunc)
    env.close()
    return float(returns.mean())


def train_cartpole(seed: int, cfg: PPOParams, max_env_steps: int, num_envs: int = 8, steps_per_chunk: int = 32,
                   eval_every: int = 10, threshold: float = 475.0) -> tuple[int | None, float, int]:
    """(env steps when the greedy policy first reached the threshold or None, wall seconds, updates)."""
    start = time.perf_counter()
    env = make_env(num_envs)
    ppo = PPO(flat_spaces(4, 2), cfg, SAMPLING, seed=seed)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    env_steps = 0
    while env_steps < max_env_steps:
        shape = (steps_per_chunk, num_envs)
        chunk = {"obs": np.empty((*shape, 4), np.float32), "next_obs": np.empty((*shape, 4), np.float32),
                 "actions": np.empty(shape, np.int64), "rewards": np.empty(shape, np.float32),
                 "terminated": np.empty(shape, bool), "truncated": np.empty(shape, bool),
                 "valid": np.ones(shape, bool), "logp": np.empty(shape, np.float32)}
        actor = build_actor(ppo.manifest(), {k: v.numpy() for k, v in ppo.policy_state().items()})
        for t in range(steps_per_chunk):
            chunk["obs"][t] = obs
            decision = actor.act(obs, explore=True, rng=rng)  # what a collector runs
            chunk["actions"][t], chunk["logp"][t] = decision.actions, decision.logp
            obs, rew, term, trunc, info = env.step(decision.actions)
            chunk["rewards"][t], chunk["terminated"][t], chunk["truncated"][t] = rew, term, trunc
            chunk["next_obs"][t] = obs
            for i in np.flatnonzero(term | trunc):
                chunk["next_obs"][t, i] = info["final_obs"][i]  # the finished episode's last state
        env_steps += steps_per_chunk * num_envs
        ppo.update([chunk])
        if ppo.updates % eval_every == 0 and greedy_score(ppo.actor, 10, seed=10_000 + ppo.updates) >= threshold:
            env.close()
            return env_steps, time.perf_counter() - start, ppo.updates
    env.close()
    return None, time.perf_counter() - start, ppo.updates


@pytest.mark.slow
def test_cartpole_solves_with_default_config():
    solved_at, seconds, updates = train_cartpole(seed=0, cfg=PPOParams(), max_env_steps=150_000)
    assert solved_at is not None, f"not solved within 150,000 env steps ({seconds:.0f}s, {updates} updates)"


def gaussian_chunk(seed: int, steps: int = 16, envs: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = (steps, envs)
    return {"obs": rng.normal(size=(*shape, 3)).astype(np.float32),
            "next_obs": rng.normal(size=(*shape, 3)).astype(np.float32),
            "actions": rng.normal(size=(*shape, 1)).astype(np.float32),
            "rewards": rng.normal(size=shape).astype(np.float32),
            "terminated": np.zeros(shape, bool), "truncated": np.zeros(shape, bool), "valid": np.ones(shape, bool),
            "logp": rng.uniform(-2.0, -0.5, shape).astype(np.float32)}


def assert_first_update_scores_under(ppo: PPO, chunk: dict[str, np.ndarray],
                                     distribution: Callable[[torch.Tensor], torch.distributions.Normal]) -> None:
    """The policy loss and entropy an update reports (one epoch, one minibatch: those of the initial weights) are
    the clipped surrogate and the entropy of `distribution(obs)`, the action distribution computed by hand."""
    rows = ppo.gae_rows(chunk, ppo.cfg.gamma, ppo.cfg.gae_lambda)
    with torch.no_grad():
        dist = distribution(torch.from_numpy(rows["obs"]))
        logp = dist.log_prob(torch.from_numpy(rows["actions"])).sum(1)
        ratio = torch.exp(logp - torch.from_numpy(rows["logp"]))
        adv = torch.from_numpy(rows["advantages"])
        expected = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean().item()
        entropy = dist.entropy().sum(1).mean().item()
    info = ppo.update([chunk])
    assert info["policy_loss"] == pytest.approx(expected, rel=1e-5)
    assert info["entropy"] == pytest.approx(entropy, rel=1e-5)


def test_gaussian_policy_loss_matches_a_hand_computation():
    """Continuous PPO: one epoch, one minibatch, so the reported policy loss is that of the initial weights."""
    cfg = PPOParams(net=NetConfig(hidden=(8,), activation="tanh"), epochs=1, minibatch_size=10_000,
                    normalize_advantages=False, log_std_init=-0.3)
    ppo = PPO(PENDULUM, cfg, Behaviour(head="gaussian", sample=True), seed=0)
    assert ppo.manifest().head == "gaussian"

    def normal(obs: torch.Tensor) -> torch.distributions.Normal:
        mean = ppo.actor(obs)
        return torch.distributions.Normal(mean, torch.full_like(mean, np.exp(-0.3)))

    assert_first_update_scores_under(ppo, gaussian_chunk(1), normal)


def test_gaussian_policy_learns_a_continuous_bandit():
    """Reward -(a - 0.7)^2: the mean action moves to 0.7 and the log-std shrinks."""
    cfg = PPOParams(net=NetConfig(hidden=(16,), activation="tanh"), epochs=4, minibatch_size=64, learning_rate=3e-3)
    ppo = PPO(PENDULUM, cfg, Behaviour(head="gaussian", sample=True), seed=0)
    rng = np.random.default_rng(0)
    obs = np.zeros((32, 8, 3), np.float32)
    for _ in range(150):
        actor = build_actor(ppo.manifest(), {k: v.numpy() for k, v in ppo.policy_state().items()})
        decision = actor.act(obs.reshape(-1, 3), explore=True, rng=rng)
        actions = decision.actions.reshape(32, 8, 1)
        ppo.update([{"obs": obs, "next_obs": obs, "actions": actions,
                     "rewards": -((actions[..., 0] - 0.7) ** 2), "terminated": np.ones((32, 8), bool),
                     "truncated": np.zeros((32, 8), bool), "valid": np.ones((32, 8), bool),
                     "logp": decision.logp.reshape(32, 8)}])
    with torch.no_grad():
        assert ppo.actor(torch.zeros(1, 3)).item() == pytest.approx(0.7, abs=0.1)
        assert ppo.actor.log_std.item() < -0.5


def test_gaussian_sde_policy_loss_is_scored_under_the_latents_spread():
    """gSDE: the learner scores actions under N(mean, sqrt(latent^2 @ exp(log_std)^2 + eps)), the latent being the
    actor's last hidden layer, as the collectors' actors draw them (tests/shared/policy/test_actors.py)."""
    cfg = PPOParams(net=NetConfig(hidden=(8,), activation="tanh"), epochs=1, minibatch_size=10_000,
                    normalize_advantages=False, log_std_init=-0.3, sde_sample_freq=4)
    ppo = PPO(PENDULUM, cfg, Behaviour(head="gaussian_sde", sample=True, sde_sample_freq=4), seed=0)
    assert ppo.manifest().head == "gaussian_sde" and tuple(ppo.actor.log_std.shape) == (8, 1)

    def state_dependent(obs: torch.Tensor) -> torch.distributions.Normal:
        latent = ppo.actor.hidden(obs)
        std = (latent.pow(2) @ torch.full((8, 1), np.exp(-0.6)) + 1e-6).sqrt()
        return torch.distributions.Normal(ppo.actor.body[-1](latent), std)

    assert_first_update_scores_under(ppo, gaussian_chunk(2), state_dependent)


def test_gaussian_sde_policy_learns_a_state_dependent_bandit():
    """Reward -(a - 0.5 * x)^2 for an observation x of N(0, 1) in every component: gSDE's actors explore with
    weights kept for 4 steps, and the policy's mean follows 0.5 * x while its spread shrinks."""
    cfg = PPOParams(net=NetConfig(hidden=(16,), activation="tanh"), epochs=4, minibatch_size=64, learning_rate=3e-3,
                    sde_sample_freq=4, log_std_init=-1.0)
    behaviour = Behaviour(head="gaussian_sde", sample=True, sde_sample_freq=4)
    ppo = PPO(PENDULUM, cfg, behaviour, seed=0)
    rng = np.random.default_rng(0)
    spread_before = None
    for _ in range(150):
        actor = build_actor(ppo.manifest(), {k: v.numpy() for k, v in ppo.policy_state().items()})
        obs = np.repeat(rng.standard_normal((32, 8, 1)), 3, axis=2).astype(np.float32)
        actions = np.zeros((32, 8, 1), np.float32)
        logp = np.zeros((32, 8), np.float32)
        for t in range(32):  # the 8 envs step together, as a collector's do
            decision = actor.act(obs[t], explore=True, rng=rng, noise_every=4)
            actions[t], logp[t] = decision.actions, decision.logp
        if spread_before is None:
            spread_before = float(np.std(actions[..., 0] - 0.5 * obs[..., 0]))
        ppo.update([{"obs": obs, "next_obs": obs, "actions": actions,
                     "rewards": -((actions[..., 0] - 0.5 * obs[..., 0]) ** 2), "terminated": np.ones((32, 8), bool),
                     "truncated": np.zeros((32, 8), bool), "valid": np.ones((32, 8), bool), "logp": logp}])
    probe = np.repeat(np.array([[-1.0], [0.0], [1.0]], np.float32), 3, axis=1)
    with torch.no_grad():
        means = ppo.actor(torch.from_numpy(probe))[:, 0].numpy()
    np.testing.assert_allclose(means, [-0.5, 0.0, 0.5], atol=0.12)
    assert float(np.std(actions[..., 0] - 0.5 * obs[..., 0])) < 0.5 * spread_before


CATEGORICAL = CriticValue(transform="pohlen", head="categorical", support=Support(min=-25, max=25, bins=51),
                          max_abs_return=500)


def test_a_categorical_critic_has_one_output_per_atom_and_learns_the_bandit():
    cfg = PPOParams(net=NetConfig(hidden=(16,), activation="tanh"), epochs=4, minibatch_size=32, learning_rate=3e-3,
                    value=CATEGORICAL)
    ppo = PPO(flat_spaces(2, 2), cfg, SAMPLING, seed=0)
    assert ppo.critic(torch.zeros(1, 2)).shape == (1, 51)
    rng = np.random.default_rng(0)
    for _ in range(20):
        info = ppo.update([bandit_chunk(ppo, rng)])
    assert np.isfinite(list(info.values())).all()
    with torch.no_grad():
        probs = torch.softmax(ppo.actor(torch.eye(2)), dim=1)
    assert probs[0, 0] > 0.9 and probs[1, 1] > 0.9, probs


@pytest.mark.slow
def test_cartpole_solves_with_a_categorical_pohlen_critic():
    solved_at, seconds, updates = train_cartpole(seed=0, cfg=PPOParams(value=CATEGORICAL), max_env_steps=150_000)
    assert solved_at is not None, f"not solved within 150,000 env steps ({seconds:.0f}s, {updates} updates)"
