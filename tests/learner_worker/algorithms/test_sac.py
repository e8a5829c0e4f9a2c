"""SAC: each loss against a by-hand computation, Polyak averaging, state round trip, the registry's refusal of
non-Box actions, the published policy acting in numpy, and a continuous bandit learned in a few hundred updates."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from rlfleet.learner_worker.algorithms import load_learner
from rlfleet.learner_worker.algorithms.sac import SAC
from rlfleet.learner_worker.distributions import tanh_gaussian_sample
from rlfleet.shared.algorithms.sac import SACParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import EnvConfig, RunConfig, load_run_config
from rlfleet.shared.payloads.spaces import BoxActions, ObsSpace, Spaces
from rlfleet.shared.policy.actors import build_actor
from rlfleet.shared.policy.manifest import Behaviour
from tests.support.learner_data import roundtrip
from tests.support.policies import PENDULUM, learner_task
from tests.support.repo import REPO

torch.set_num_threads(1)

TANH = Behaviour(head="tanh_gaussian", sample=False)
SPACES = Spaces(obs=ObsSpace(shape=(3,), dtype="float32"), action=BoxActions(low=(-1.0, -2.0), high=(1.0, 2.0)))
SMALL = SACParams(net=NetConfig(hidden=(16, 16)), batch_size=32)


def make_batch(seed: int, size: int = 32, obs_dim: int = 3, action_dim: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(size, obs_dim)).astype(np.float32),
        "actions": rng.uniform(-1, 1, (size, action_dim)).astype(np.float32),
        "returns": rng.normal(size=size).astype(np.float32),
        "boot_obs": rng.normal(size=(size, obs_dim)).astype(np.float32),
        "discount": np.where(rng.random(size) < 0.2, 0.0, 0.99).astype(np.float32),
        "weights": rng.uniform(0.2, 1.0, size).astype(np.float32),
    }


def tensors(batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(v) for k, v in batch.items()}


def adam_first_step(nets: torch.nn.Module, loss: torch.Tensor, lr: float) -> None:
    """Adam's first step by hand: with bias correction m_hat = g and v_hat = g**2, so p -= lr * g / (|g| + eps)."""
    params = list(nets.parameters())
    grads = torch.autograd.grad(loss, params)
    with torch.no_grad():
        for p, g in zip(params, grads, strict=True):
            p -= lr * g / (g.abs() + 1e-8)


@pytest.mark.parametrize("target_entropy", ["auto", -0.3])
def test_first_update_losses_match_a_computation_by_hand(target_entropy: float | str) -> None:
    cfg = SMALL.model_copy(update={"target_entropy": target_entropy, "ent_coef_init": 0.5, "learning_rate": 1e-2})
    sac = SAC(SPACES, cfg, TANH, seed=0)
    for net in sac.targets:  # targets that differ from the critics, or using the wrong ones would go unseen
        for p in net.parameters():
            p.add_(0.1)
    b = tensors(make_batch(1))
    draws = torch.Generator().set_state(sac.generator.get_state())
    actor, critics, targets = copy.deepcopy(sac.actor), copy.deepcopy(sac.critics), copy.deepcopy(sac.targets)

    # the draws in the learner's order: a ~ pi(.|s), then a' ~ pi(.|s')
    actions_pi, logp_pi = tanh_gaussian_sample(actor(b["obs"]), draws)
    entropy_target = -2.0 if target_entropy == "auto" else target_entropy
    alpha = 0.5
    alpha_loss = -(math.log(alpha) * (logp_pi.detach() + entropy_target)).mean()
    with torch.no_grad():
        next_actions, next_logp = tanh_gaussian_sample(actor(b["boot_obs"]), draws)
        next_q = torch.min(targets[0](b["boot_obs"], next_actions), targets[1](b["boot_obs"], next_actions)).squeeze(1)
        y = b["returns"] + b["discount"] * (next_q - alpha * next_logp)
    q1, q2 = (c(b["obs"], b["actions"]).squeeze(1) for c in critics)
    critic_loss = (b["weights"] * 0.5 * ((q1 - y) ** 2 + (q2 - y) ** 2)).mean()
    td_abs = 0.5 * ((q1 - y).abs() + (q2 - y).abs())

    def actor_loss(nets: torch.nn.Module) -> float:
        with torch.no_grad():
            q_pi = torch.min(nets[0](b["obs"], actions_pi), nets[1](b["obs"], actions_pi)).squeeze(1)
            return float((alpha * logp_pi - q_pi).mean())

    before_critic_step = actor_loss(critics)
    adam_first_step(critics, critic_loss, cfg.learning_rate)  # the actor loss reads the critics just updated
    expected_actor_loss = actor_loss(critics)
    assert abs(expected_actor_loss - before_critic_step) > 1e-3  # the test can tell the two orders apart

    info = sac.update(make_batch(1))
    assert info["alpha"] == pytest.approx(alpha, rel=1e-6)
    assert info["alpha_loss"] == pytest.approx(float(alpha_loss), rel=1e-5)
    assert info["critic_loss"] == pytest.approx(float(critic_loss.detach()), rel=1e-5)
    assert info["actor_loss"] == pytest.approx(expected_actor_loss, rel=1e-4)
    assert info["entropy"] == pytest.approx(-float(logp_pi.detach().mean()), rel=1e-5)
    assert info["q_mean"] == pytest.approx(float(0.5 * (q1.mean() + q2.mean()).detach()), rel=1e-5)
    assert sac.td_abs is not None
    np.testing.assert_allclose(sac.td_abs, td_abs.detach().numpy(), rtol=1e-5)
    # alpha's first Adam step moves log(alpha) by lr against the sign of its gradient
    grad = -float((logp_pi.detach() + entropy_target).mean())
    expected_log_alpha = math.log(alpha) - cfg.learning_rate * math.copysign(1, grad)
    assert float(sac.log_alpha.detach()) == pytest.approx(expected_log_alpha, rel=1e-5)


def test_without_importance_weights_every_row_counts_alike() -> None:
    batch = make_batch(2)
    weighted, plain = SAC(SPACES, SMALL, TANH, seed=0), SAC(SPACES, SMALL, TANH, seed=0)
    batch["weights"][:] = 1.0
    unweighted = {k: v for k, v in batch.items() if k != "weights"}
    assert weighted.update(batch)["critic_loss"] == pytest.approx(plain.update(unweighted)["critic_loss"], rel=1e-6)


def snapshot(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def test_targets_are_polyak_averaged_every_interval() -> None:
    tau, every = 0.25, 2
    sac = SAC(SPACES, SMALL.model_copy(update={"tau": tau, "target_update_interval": every, "learning_rate": 1e-2}),
              TANH, seed=0)
    assert all(torch.equal(a, b) for a, b in zip(snapshot(sac.targets), snapshot(sac.critics), strict=True))
    for step in range(1, 7):
        old_targets = snapshot(sac.targets)
        sac.update(make_batch(step))
        new_targets, online = snapshot(sac.targets), snapshot(sac.critics)
        for old, new, now in zip(old_targets, new_targets, online, strict=True):
            if step % every:
                assert torch.equal(new, old), f"targets moved between Polyak steps (update {step})"
            else:
                assert torch.equal(new, torch.lerp(old, now, tau))
                torch.testing.assert_close(new, (1 - tau) * old + tau * now, rtol=1e-6, atol=1e-7)
    assert not any(p.requires_grad for p in sac.targets.parameters())


def test_state_load_roundtrip_reproduces_training() -> None:
    cfg = SMALL.model_copy(update={"target_update_interval": 3, "learning_rate": 1e-2})
    first = SAC(SPACES, cfg, TANH, seed=0)
    for step in range(5):
        first.update(make_batch(step))
    saved = roundtrip(first.state())

    second = SAC(SPACES, cfg, TANH, seed=99)
    second.load(saved)
    assert second.updates == 5 and torch.equal(second.log_alpha, first.log_alpha)
    # identical state -> identical futures: weights, Adam moments, alpha, the draws and the Polyak phase
    for step in range(5, 12):
        batch = make_batch(step)
        assert first.update(batch) == second.update(batch)
    for a, b in [(first.actor, second.actor), (first.critics, second.critics), (first.targets, second.targets)]:
        assert all(torch.equal(x, y) for x, y in zip(snapshot(a), snapshot(b), strict=True))


def test_published_policy_acts_in_numpy_like_the_learner() -> None:
    sac = SAC(PENDULUM, SMALL, TANH, seed=0)
    actor = build_actor(sac.manifest(), {k: v.numpy() for k, v in sac.policy_state().items()})
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    with torch.no_grad():
        mean = torch.tanh(sac.actor(torch.from_numpy(obs))[:, :1]).numpy()
    np.testing.assert_allclose(actor.greedy(obs), 2.0 * mean, rtol=1e-5, atol=1e-6)  # Pendulum's bounds: [-2, 2]


def test_registry_gives_sac_box_actions_only() -> None:
    with pytest.raises(ValueError, match="algo.name 'sac' cannot train env.id 'CartPole-v1': sac needs a Box action "
                                         "space, the env has discrete; algorithms that can: ") as refused:
        RunPlan.of(RunConfig(algo=SACParams(), env=EnvConfig(id="CartPole-v1")))
    assert "sac" not in str(refused.value).rpartition("that can: ")[2]

    config = load_run_config(REPO / "configs" / "pendulum_sac.yaml")
    plan = RunPlan.of(config)
    assert plan.behaviour == Behaviour(head="tanh_gaussian", sample=False, random_env_steps=100)
    assert "logp" not in plan.schema.columns
    assert isinstance(load_learner(learner_task(config), torch.device("cpu")), SAC)


def test_learns_a_continuous_bandit() -> None:
    """One-step episodes (discount 0) with reward -(a - a*(s))**2, a*(s) = 0.6 s, from uniformly random actions:
    the greedy action must approach a*(s)."""
    rng = np.random.default_rng(0)
    spaces = Spaces(obs=ObsSpace(shape=(1,), dtype="float32"), action=BoxActions(low=(-1.0,), high=(1.0,)))
    cfg = SACParams(net=NetConfig(hidden=(32, 32)), learning_rate=1e-2, batch_size=64, ent_coef_init=0.1)
    sac = SAC(spaces, cfg, TANH, seed=0)
    for _ in range(300):
        obs = rng.uniform(-1, 1, (64, 1)).astype(np.float32)
        actions = rng.uniform(-1, 1, (64, 1)).astype(np.float32)
        sac.update({"obs": obs, "actions": actions, "returns": -((actions - 0.6 * obs) ** 2).sum(1),
                    "boot_obs": obs, "discount": np.zeros(64, np.float32)})
    probe = np.linspace(-1, 1, 9, dtype=np.float32)[:, None]
    actor = build_actor(sac.manifest(), {k: v.numpy() for k, v in sac.policy_state().items()})
    np.testing.assert_allclose(actor.greedy(probe), 0.6 * probe, atol=0.1)
