"""Actor and critic, separate or on a shared trunk: which form each encoder gets, that the shared one trains both
heads through one encoder, publishes the actor alone and resumes from its checkpoint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from rlfleet.learner_worker.actor_critic import ActorCritic
from rlfleet.learner_worker.algorithms.a2c import A2C
from rlfleet.learner_worker.algorithms.impala import Impala
from rlfleet.learner_worker.algorithms.ppo import PPO
from rlfleet.learner_worker.checkpoint import Checkpoint, load_latest_checkpoint, save_checkpoint
from rlfleet.shared.algorithms.a2c import A2CParams
from rlfleet.shared.algorithms.impala import ImpalaParams
from rlfleet.shared.algorithms.ppo import PPOParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.payloads.spaces import DiscreteActions, ObsSpace, Spaces
from rlfleet.shared.policy.actors import TorchActor, build_actor
from rlfleet.shared.policy.nets import Network, PolicyNet
from rlfleet.shared.storage.local import LocalStore
from tests.support.learner_data import IMAGE_SHAPE, N_ACTIONS, make_image_chunk, params_equal
from tests.support.policies import SAMPLING, flat_spaces

torch.set_num_threads(1)
IMAGES = Spaces(obs=ObsSpace(shape=IMAGE_SHAPE, dtype="uint8"), action=DiscreteActions(n=N_ACTIONS))
IMPALA_NET = NetConfig(hidden=(32,), encoder={"kind": "impala", "channels": [4, 8]})


def ppo(net: NetConfig = IMPALA_NET, seed: int = 0, spaces: Spaces = IMAGES) -> PPO:
    return PPO(spaces, PPOParams(net=net, epochs=4, minibatch_size=16, learning_rate=1e-3), SAMPLING, seed=seed)


def encoder_params(learner: ActorCritic) -> list[nn.Parameter]:
    return list(learner.actor.conv.parameters())


def test_image_encoders_share_their_trunk_and_mlps_keep_a_separate_critic() -> None:
    shared = ppo()
    assert shared.trunk == "shared" and isinstance(shared.critic, nn.Linear)
    assert shared.critic.in_features == 32 and shared.critic.out_features == 1  # the value head on hidden[-1]
    assert not any(name.startswith("critic.") for name, _ in shared.model.named_parameters()
                   if "conv" in name)  # one encoder: the actor's
    mlp = ppo(NetConfig(hidden=(16,)), spaces=flat_spaces(4, N_ACTIONS))
    assert mlp.trunk == "separate" and isinstance(mlp.critic, Network)
    separate = ppo(IMPALA_NET.model_copy(update={"trunk": "separate"}))
    assert isinstance(separate.critic, Network) and hasattr(separate.critic, "conv")
    assert sum(p.numel() for p in shared.params) < sum(p.numel() for p in separate.params)


@pytest.mark.parametrize("trunk", ["separate", "shared"])
def test_orthogonal_init_starts_the_policy_head_small_and_the_value_head_at_gain_one(trunk: str) -> None:
    spaces = flat_spaces(4, N_ACTIONS)
    learner = ppo(NetConfig(hidden=(64, 64), trunk=trunk, init="orthogonal"), spaces=spaces)
    default = ppo(NetConfig(hidden=(64, 64), trunk=trunk), spaces=spaces)
    hidden, head = learner.actor.body[2], learner.actor.body[-1]
    assert isinstance(hidden, nn.Linear) and isinstance(head, nn.Linear)
    torch.testing.assert_close(hidden.weight @ hidden.weight.T, 2.0 * torch.eye(64), atol=1e-4, rtol=0)
    assert not hidden.bias.any() and not head.bias.any()
    torch.testing.assert_close(head.weight @ head.weight.T, 1e-4 * torch.eye(N_ACTIONS), atol=1e-7, rtol=0)
    value = [m for m in learner.critic.modules() if isinstance(m, nn.Linear)][-1]
    torch.testing.assert_close(value.weight @ value.weight.T, torch.eye(1), atol=1e-5, rtol=0)
    # the policy starts near uniform; torch's default does not
    obs = torch.randn(256, 4)
    assert learner.actor(obs).abs().max() < 0.1 < default.actor(obs).abs().max()
    # the choice is the learner's: same manifest, same policy-file keys
    assert learner.manifest() == default.manifest()
    assert sorted(learner.policy_state()) == sorted(default.policy_state())


def test_the_shared_form_publishes_the_actor_alone_and_collectors_act_with_it() -> None:
    learner = ppo()
    state = learner.policy_state()
    assert sorted(state) == sorted(PolicyNet(learner.manifest()).state_dict())
    actor = build_actor(learner.manifest(), {k: v.numpy() for k, v in state.items()})
    assert isinstance(actor, TorchActor)
    obs = make_image_chunk(1)["obs"][0]
    with torch.no_grad():
        want = learner.actor(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(actor.forward(obs), want, rtol=1e-5, atol=1e-6)


def test_a_shared_trunk_ppo_update_lowers_its_loss_on_a_fixed_batch() -> None:
    learner = ppo()
    chunk = make_image_chunk(2, steps=16, envs=4)
    batch = learner.gae_batch([chunk], learner.cfg.gamma, learner.cfg.gae_lambda)
    rows = torch.arange(len(batch["targets"]))
    before = learner.minibatch_loss(batch, rows)[0].item()
    encoder_before = [p.detach().clone() for p in encoder_params(learner)]
    learner.update([chunk])
    assert learner.minibatch_loss(batch, rows)[0].item() < before
    assert any(not torch.equal(a, b) for a, b in zip(encoder_before, encoder_params(learner), strict=True))


@pytest.mark.parametrize("make", [
    lambda: ppo(),
    lambda: A2C(IMAGES, A2CParams(net=IMPALA_NET), SAMPLING, seed=0),
    lambda: Impala(IMAGES, ImpalaParams(net=IMPALA_NET), SAMPLING, seed=0),
], ids=["ppo", "a2c", "impala"])
def test_the_value_loss_trains_the_shared_encoder(make) -> None:
    """The critic's loss reaches the encoder (what makes the trunk shared), and the update runs on images."""
    learner = make()
    assert learner.trunk == "shared"
    chunk = make_image_chunk(3)
    obs = torch.from_numpy(chunk["obs"].reshape(-1, *IMAGE_SHAPE))
    _, _, critic_out = learner.evaluate(obs, torch.from_numpy(chunk["actions"].reshape(-1)))
    critic_out.square().mean().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in encoder_params(learner))
    info = learner.update([chunk])
    assert all(np.isfinite(v) for v in info.values())


def test_the_shared_form_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    writer = ppo(seed=0)
    writer.update([make_image_chunk(4)])
    store = LocalStore(tmp_path)
    save_checkpoint(store, Checkpoint(iteration=1, policy_version=1, transitions_trained=32, algo=writer.state()))
    loaded = load_latest_checkpoint(store)
    assert loaded is not None
    resumed = ppo(seed=1)
    resumed.load(loaded.algo)
    assert params_equal(writer.actor, resumed.actor) and params_equal(writer.critic, resumed.critic)
    chunk = make_image_chunk(5)
    assert writer.update([chunk]) == resumed.update([chunk])  # optimizer moments and shuffling resumed too
    assert params_equal(writer.actor, resumed.actor) and params_equal(writer.critic, resumed.critic)


def test_a_checkpoint_of_the_other_form_is_refused_naming_the_setting() -> None:
    separate = ppo(IMPALA_NET.model_copy(update={"trunk": "separate"}))
    with pytest.raises(ValueError, match="checkpoint's critic has a separate trunk.*set algo.net.trunk: separate"):
        ppo().load(separate.state())
    old = ppo(NetConfig(hidden=(16,)), spaces=flat_spaces(4, N_ACTIONS)).state()
    del old["trunk"]  # written before the trunk was a choice: always separate
    ppo(NetConfig(hidden=(16,)), spaces=flat_spaces(4, N_ACTIONS)).load(old)


def test_policy_gradient_step_with_a_ratio_takes_the_importance_weighted_gradient() -> None:
    """Without clip_ratio the policy term is -mean(ratio * A): its gradient is ratio * A * grad log pi, the
    plain policy gradient's weighted by pi/mu. Two A2C learners on one batch: one told the ratios, one given the
    advantages pre-multiplied by them, take the same step."""
    told, weighted = (A2C(flat_spaces(4, N_ACTIONS), A2CParams(net=NetConfig(hidden=(8,))), SAMPLING, seed=1)
                      for _ in range(2))
    rng = np.random.default_rng(0)
    obs = torch.from_numpy(rng.normal(size=(16, 4)).astype(np.float32))
    actions = torch.from_numpy(rng.integers(0, N_ACTIONS, 16))
    advantages = torch.from_numpy(rng.normal(size=16).astype(np.float32))
    behaviour = torch.from_numpy(np.log(rng.uniform(0.2, 0.5, 16)).astype(np.float32))
    targets = torch.zeros(16)
    logp, entropy, critic_out = told.evaluate(obs, actions)
    told.policy_gradient_step(logp, entropy, critic_out, advantages, targets, 0.5, 0.0, 1e6,
                              ratio=(logp - behaviour).exp())
    logp, entropy, critic_out = weighted.evaluate(obs, actions)
    weights = (logp.detach() - behaviour).exp()
    weighted.policy_gradient_step(logp, entropy, critic_out, weights * advantages, targets, 0.5, 0.0, 1e6)
    for x, y in zip(told.params, weighted.params, strict=True):
        torch.testing.assert_close(x, y)


def test_a_clip_without_a_ratio_is_refused() -> None:
    learner = A2C(flat_spaces(4, N_ACTIONS), A2CParams(net=NetConfig(hidden=(8,))), SAMPLING, seed=1)
    logp, entropy, critic_out = learner.evaluate(torch.zeros(2, 4), torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="pass the ratio"):
        learner.policy_gradient_step(logp, entropy, critic_out, torch.ones(2), torch.zeros(2), 0.5, 0.0, 1.0,
                                     clip_ratio=0.2)
