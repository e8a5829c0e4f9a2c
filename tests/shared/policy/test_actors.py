"""Actors built from manifests: numpy and torch agree on outputs and log-probs, for every action head."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.learner_worker.distributions import log_prob_entropy
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.payloads.spaces import BoxActions, DiscreteActions, MultiDiscreteActions, ObsSpace, Spaces
from rlfleet.shared.policy import actors
from rlfleet.shared.policy.actors import NumpyActor, PolicyError, TorchActor, build_actor, random_actions, to_env
from rlfleet.shared.policy.manifest import ObsNorm, PolicyManifest
from rlfleet.shared.policy.nets import PolicyNet
from tests.support.policies import CARTPOLE, PENDULUM, manifest, policy_state

torch.set_num_threads(1)
MULTI = Spaces(obs=ObsSpace(shape=(2, 3), dtype="float32"), action=MultiDiscreteActions(nvec=(3, 2)))
IMAGE = Spaces(obs=ObsSpace(shape=(10, 10, 3), dtype="uint8"), action=DiscreteActions(n=4))
CASES = [(CARTPOLE, "categorical"), (MULTI, "multi_categorical"), (PENDULUM, "gaussian"), (PENDULUM, "gaussian_sde")]


def obs_for(spaces: Spaces, n: int = 64, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if spaces.obs.dtype == "uint8":
        return rng.integers(0, 256, (n, *spaces.obs.shape)).astype(np.uint8)
    return rng.standard_normal((n, *spaces.obs.shape)).astype(np.float32)


@pytest.mark.parametrize(("spaces", "head"), [*CASES, (CARTPOLE, "q_values"), (PENDULUM, "tanh_gaussian")])
def test_numpy_forward_equals_torch(spaces, head):
    m = manifest(spaces, head, (8, 8))
    state = policy_state(m, seed=1)
    actor = build_actor(m, state)
    assert isinstance(actor, NumpyActor)
    net = PolicyNet(m)
    net.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    obs = obs_for(spaces)
    with torch.no_grad():
        np.testing.assert_allclose(actor.forward(obs), net(torch.from_numpy(obs)).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("spaces", "head"), CASES)
def test_behaviour_logp_equals_the_learners(spaces, head):
    """The log-prob a collector records is the one the learner computes for the same action."""
    m = manifest(spaces, head, (8,))
    state = policy_state(m, seed=2)
    if "log_std" in state:
        state["log_std"] = np.full_like(state["log_std"], -0.5)
    actor = build_actor(m, state)
    obs = obs_for(spaces, 256)
    decision = actor.act(obs, explore=True, rng=np.random.default_rng(3))
    net = PolicyNet(m)
    net.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    with torch.no_grad():
        logp, entropy = log_prob_entropy(head, spaces, net(torch.from_numpy(obs)), getattr(net, "log_std", None),
                                         torch.from_numpy(decision.actions))
    np.testing.assert_allclose(decision.logp, logp.numpy(), rtol=1e-4, atol=1e-4)
    # gaussian_sde's spread is the latent's size times exp(log_std): rows of small latents have negative entropy
    assert (entropy.numpy() > 0).all() if head != "gaussian_sde" else np.isfinite(entropy.numpy()).all()


def test_sde_noise_has_the_spread_its_log_prob_describes():
    """Over fresh exploration weights, gaussian_sde's actions spread as the N(mean, sde_std) the log-prob scores:
    the per-dimension mean and standard deviation of 4,000 draws for one observation match the network's."""
    m = manifest(PENDULUM, "gaussian_sde", (8,))
    state = policy_state(m, seed=4)
    state["log_std"] = np.random.default_rng(0).uniform(-1.0, 0.5, state["log_std"].shape).astype(np.float32)
    actor = build_actor(m, state)
    obs = np.repeat(obs_for(PENDULUM, 1, seed=5), 4000, axis=0)  # one observation, 4,000 envs: 4,000 weight draws
    drawn = actor.act(obs, explore=True, rng=np.random.default_rng(6)).actions.astype(np.float64)
    out = actor.forward(obs[:1]).astype(np.float64)
    mean, std = out[0, :1], actors.sde_std(out[:, 1:], state["log_std"].astype(np.float64))[0]
    assert abs(drawn.mean(0)[0] - mean[0]) < 4 * std[0] / np.sqrt(4000)
    assert drawn.std(0)[0] == pytest.approx(std[0], rel=0.05)


def test_sde_weights_are_kept_for_noise_every_steps_then_redrawn():
    """An env's exploration weights last `noise_every` explored steps (SB3's sde_sample_freq): the same observation
    gets the same action within a window and another one after it; a greedy step draws nothing."""
    m = manifest(PENDULUM, "gaussian_sde", (8,))
    actor = build_actor(m, policy_state(m, seed=7))
    obs, rng = obs_for(PENDULUM, 3, seed=8), np.random.default_rng(9)
    window = [actor.act(obs, explore=True, rng=rng, noise_every=3).actions for _ in range(3)]
    greedy = actor.act(obs, explore=False, rng=rng, noise_every=3).actions
    after = actor.act(obs, explore=True, rng=rng, noise_every=3).actions
    np.testing.assert_array_equal(window[0], window[1])
    np.testing.assert_array_equal(window[0], window[2])
    assert not np.allclose(window[0], after)
    assert not np.allclose(window[0], greedy)
    np.testing.assert_allclose(greedy, actor.forward(obs)[:, :1], rtol=1e-6)
    assert len({tuple(row) for row in window[0]}) == 3  # each env has weights of its own


def test_sampled_categorical_actions_follow_softmax():
    m = manifest(CARTPOLE, "categorical", (4,))
    state = policy_state(m)
    state["body.2.weight"][:] = 0
    state["body.2.bias"][:] = np.log([0.2, 0.8])
    actor = build_actor(m, state)
    acts = actor.act(np.zeros((20_000, 4), np.float32), explore=True, rng=np.random.default_rng(0)).actions
    assert abs(acts.mean() - 0.8) < 0.01


def test_gaussian_actions_are_clipped_for_the_env_but_stored_as_drawn():
    m = manifest(PENDULUM, "gaussian", (4,))
    state = policy_state(m)
    state["body.2.weight"][:] = 0
    state["body.2.bias"][:] = 1.5
    state["log_std"][:] = 0.0
    decision = build_actor(m, state).act(np.zeros((5000, 3), np.float32), True, np.random.default_rng(1))
    assert decision.actions.max() > 2.5  # drawn beyond the bound ...
    assert decision.env_actions.max() == 2.0 and decision.env_actions.min() >= -2.0  # ... applied inside it
    assert build_actor(m, state).greedy(np.zeros((1, 3), np.float32))[0, 0] == pytest.approx(1.5)


def test_tanh_actions_are_rescaled_into_the_bounds():
    spaces = Spaces(obs=ObsSpace(shape=(1,), dtype="float32"), action=BoxActions(low=(0.0, -1.0), high=(10.0, 3.0)))
    np.testing.assert_allclose(to_env(spaces, "tanh_gaussian", np.array([[-1.0, 1.0], [0.0, 0.0]], np.float32)),
                               [[0.0, 3.0], [5.0, 1.0]])
    m = manifest(spaces, "tanh_gaussian", (4,))
    decision = build_actor(m, policy_state(m)).act(obs_for(spaces, 1000), True, np.random.default_rng(0))
    assert (np.abs(decision.actions) <= 1).all()
    assert (decision.env_actions[:, 0] >= 0).all() and (decision.env_actions[:, 0] <= 10).all()


def test_epsilon_greedy_on_q_values():
    actor = build_actor(manifest(), policy_state(manifest()))
    obs = obs_for(CARTPOLE, 20_000)
    greedy = actor.greedy(obs)
    explored = actor.act(obs, explore=True, rng=np.random.default_rng(0), epsilon=0.3).actions
    assert abs((explored != greedy).mean() - 0.15) < 0.01  # half of the random picks hit the greedy action


@pytest.mark.parametrize(("spaces", "head"), [*CASES, (PENDULUM, "tanh_gaussian")])
def test_random_actions_fit_the_space(spaces, head):
    decision = random_actions(spaces, head, 500, np.random.default_rng(0))
    action = spaces.action
    if isinstance(action, BoxActions):
        assert decision.env_actions.shape == (500, 1)
        assert decision.env_actions.min() >= -2 and decision.env_actions.max() <= 2
    elif isinstance(action, MultiDiscreteActions):
        assert decision.actions.shape == (500, 2) and (decision.actions.max(axis=0) == [2, 1]).all()
    else:
        assert set(decision.actions.tolist()) == {0, 1}


def test_observation_normalisation_comes_from_the_manifest():
    m = manifest(CARTPOLE, "q_values", (4,))
    state = policy_state(m)
    norm = m.model_copy(update={"obs_norm": ObsNorm(mean=(1.0, 2.0, 3.0, 4.0), var=(4.0, 4.0, 4.0, 4.0))})
    obs = obs_for(CARTPOLE, 8)
    shifted = build_actor(norm, state).forward(obs * 2 + np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    np.testing.assert_allclose(shifted, build_actor(m, state).forward(obs), rtol=1e-4, atol=1e-4)
    net = PolicyNet(norm)
    net.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    with torch.no_grad():
        torch_out = net(torch.from_numpy(obs * 2 + np.array([1.0, 2.0, 3.0, 4.0], np.float32))).numpy()
    np.testing.assert_allclose(torch_out, shifted, rtol=1e-4, atol=1e-4)


def test_image_policies_act_through_torch_on_uint8():
    m = manifest(IMAGE, "categorical", (16,))
    assert m.encoder.kind == "cnn"
    actor = build_actor(m, policy_state(m))
    assert isinstance(actor, TorchActor)
    decision = actor.act(obs_for(IMAGE, 5), explore=True, rng=np.random.default_rng(0))
    assert decision.actions.shape == (5,) and decision.logp is not None


def test_a_state_dict_of_another_network_is_refused():
    state = policy_state(manifest(hidden=(8,)))
    with pytest.raises(PolicyError, match="layer 0"):
        build_actor(manifest(hidden=(16,)), state)
    with pytest.raises(PolicyError, match="keys"):
        build_actor(manifest(hidden=(8, 8)), state)
    with pytest.raises(PolicyError):
        build_actor(manifest(IMAGE, "categorical", (8,)), policy_state(manifest(IMAGE, "categorical", (16,))))


ATARI_FIRST = Spaces(obs=ObsSpace(shape=(4, 84, 84), dtype="uint8"), action=DiscreteActions(n=6))
ATARI_LAST = Spaces(obs=ObsSpace(shape=(84, 84, 4), dtype="uint8"), action=DiscreteActions(n=6))


def encoder_manifest(spaces: Spaces, kind: str) -> PolicyManifest:
    return PolicyManifest.of(spaces, NetConfig(hidden=(32,), encoder={"kind": kind}), "categorical")


@pytest.mark.parametrize("spaces", [ATARI_FIRST, ATARI_LAST], ids=["channels-first", "channels-last"])
@pytest.mark.parametrize("kind", ["nature", "impala"])
def test_an_image_actor_batched_over_envs_gives_each_envs_own_outputs(spaces: Spaces, kind: str) -> None:
    """One forward pass for 8 envs: every row is what that env's observation alone gives (no batch coupling)."""
    m = encoder_manifest(spaces, kind)
    actor = build_actor(m, policy_state(m, seed=4))
    assert isinstance(actor, TorchActor)
    obs = obs_for(spaces, 8)
    batched = actor.forward(obs)
    assert batched.shape == (8, 6)
    for i in range(8):
        np.testing.assert_allclose(batched[i], actor.forward(obs[i:i + 1])[0], rtol=1e-5, atol=1e-6)


def test_an_mlp_on_images_acts_in_numpy() -> None:
    m = PolicyManifest.of(IMAGE, NetConfig(hidden=(8,), encoder={"kind": "mlp"}), "categorical")
    actor = build_actor(m, policy_state(m))
    assert isinstance(actor, NumpyActor)
    assert actor.forward(obs_for(IMAGE, 3)).shape == (3, 4)


def test_image_actors_run_on_the_workers_torch_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's default is a thread per core: every collector of a machine would contend for all of them."""
    m = encoder_manifest(ATARI_FIRST, "nature")
    state = policy_state(m)
    try:
        for value, threads in (("2", 2), (None, 1)):
            monkeypatch.setattr(actors, "_threads_set", False)
            if value is None:
                monkeypatch.delenv("RLFLEET_TORCH_THREADS", raising=False)
            else:
                monkeypatch.setenv("RLFLEET_TORCH_THREADS", value)
            torch.set_num_threads(3)
            build_actor(m, state)
            assert torch.get_num_threads() == threads
        monkeypatch.setattr(actors, "_threads_set", False)
        monkeypatch.setenv("RLFLEET_TORCH_THREADS", "many")
        with pytest.raises(ValueError, match="RLFLEET_TORCH_THREADS='many': set it to a whole number of threads"):
            build_actor(m, state)
    finally:
        torch.set_num_threads(1)
