"""DQN update: learning on a fixed batch, the double-Q target, target-net syncs, state round trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rlfleet.learner_worker.algorithms.dqn import DQN
from rlfleet.shared.algorithms.dqn import DQNParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.values import ValueTransform
from tests.support.learner_data import N_ACTIONS, OBS_DIM, make_batch, params_equal, roundtrip
from tests.support.policies import EPSILON_GREEDY, flat_spaces

torch.set_num_threads(1)

pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")


def test_update_reduces_td_loss_on_fixed_batch():
    cfg = DQNParams(net=NetConfig(hidden=(32, 32)), learning_rate=3e-3, target_update_every=10)
    dqn = DQN(flat_spaces(OBS_DIM, N_ACTIONS), cfg, EPSILON_GREEDY, seed=0)
    batch = make_batch(1, discount=0.5)
    losses = [dqn.update(batch)["td_loss"] for _ in range(200)]
    assert all(np.isfinite(losses))
    assert np.mean(losses[-10:]) < 0.2 * np.mean(losses[:10])
    assert dqn.nets.updates == 200


def test_update_reports_metrics():
    dqn = DQN(flat_spaces(OBS_DIM, N_ACTIONS), DQNParams(net=NetConfig(hidden=(16,))), EPSILON_GREEDY, seed=0)
    batch = make_batch(2)
    with torch.no_grad():
        q = dqn.nets.online(torch.from_numpy(batch["obs"])).gather(1, torch.from_numpy(batch["actions"])[:, None])
    info = dqn.update(batch)
    assert set(info) == {"td_loss", "q_mean", "grad_norm"}
    assert info["q_mean"] == pytest.approx(float(q.mean()), rel=1e-5)
    assert info["grad_norm"] > 0


def randomise(net: torch.nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))


def manual_losses(dqn: DQN, batch: dict[str, np.ndarray]) -> dict[str, float]:
    """Loss under double-Q and under the two usual mistakes, computed by hand from the nets."""
    with torch.no_grad():
        obs, boot = torch.from_numpy(batch["obs"]), torch.from_numpy(batch["boot_obs"])
        q_all = dqn.nets.online(obs).numpy()
        online_next = dqn.nets.online(boot).numpy()
        target_next = dqn.nets.target(boot).numpy()
    rows = np.arange(len(batch["obs"]))
    q = q_all[rows, batch["actions"]]
    choices = {
        "double": target_next[rows, online_next.argmax(1)],
        "target_max": target_next.max(1),
        "online_max": online_next.max(1),
    }
    out = {}
    for name, next_q in choices.items():
        target = batch["returns"] + batch["discount"] * next_q
        out[name] = float(F.smooth_l1_loss(torch.from_numpy(q), torch.from_numpy(target.astype(np.float32))))
    return out


@pytest.mark.parametrize("double_q", [True, False])
def test_target_uses_online_argmax_and_target_value(double_q: bool):
    cfg = DQNParams(net=NetConfig(hidden=(16,)), double_q=double_q)
    dqn = DQN(flat_spaces(OBS_DIM, N_ACTIONS), cfg, EPSILON_GREEDY, seed=0)
    randomise(dqn.nets.target, seed=123)  # a target net that disagrees with the online net
    batch = make_batch(3, size=128, discount=0.99)
    expected = manual_losses(dqn, batch)
    # the three candidate targets must be distinguishable, or this test could not fail
    assert abs(expected["double"] - expected["target_max"]) > 1e-2
    assert abs(expected["double"] - expected["online_max"]) > 1e-2
    loss = dqn.update(batch)["td_loss"]
    assert loss == pytest.approx(expected["double" if double_q else "target_max"], rel=1e-5)


def test_discount_zero_ignores_bootstrap():
    dqn = DQN(flat_spaces(OBS_DIM, N_ACTIONS), DQNParams(net=NetConfig(hidden=(16,))), EPSILON_GREEDY, seed=0)
    batch = make_batch(4)
    batch["discount"][:] = 0.0
    with torch.no_grad():
        q = dqn.nets.online(torch.from_numpy(batch["obs"])).gather(1, torch.from_numpy(batch["actions"])[:, None])
    expected = float(F.smooth_l1_loss(q.squeeze(1), torch.from_numpy(batch["returns"])))
    randomise(dqn.nets.target, seed=5)
    assert dqn.update(batch)["td_loss"] == pytest.approx(expected, rel=1e-5)


def test_target_net_syncs_exactly_every_n_updates():
    every = 4
    cfg = DQNParams(net=NetConfig(hidden=(16,)), target_update_every=every, learning_rate=1e-2)
    dqn = DQN(flat_spaces(OBS_DIM, N_ACTIONS), cfg, EPSILON_GREEDY, seed=0)
    assert params_equal(dqn.nets.online, dqn.nets.target)
    synced = {k: v.clone() for k, v in dqn.nets.online.state_dict().items()}
    for step in range(1, 4 * every + 2):
        dqn.update(make_batch(step))
        if step % every == 0:
            assert params_equal(dqn.nets.online, dqn.nets.target), f"not synced after update {step}"
            synced = {k: v.clone() for k, v in dqn.nets.online.state_dict().items()}
        else:
            assert not params_equal(dqn.nets.online, dqn.nets.target), f"synced early after update {step}"
            # between syncs the target keeps the weights of the last sync
            assert all(torch.equal(dqn.nets.target.state_dict()[k], v) for k, v in synced.items())
        for p in dqn.nets.target.parameters():
            assert not p.requires_grad


def test_state_load_roundtrip_reproduces_training():
    cfg = DQNParams(net=NetConfig(hidden=(16, 16)), target_update_every=3, learning_rate=1e-2)
    first = DQN(flat_spaces(OBS_DIM, N_ACTIONS), cfg, EPSILON_GREEDY, seed=0)
    for step in range(5):
        first.update(make_batch(step))
    saved = roundtrip(first.state())

    second = DQN(flat_spaces(OBS_DIM, N_ACTIONS), cfg, EPSILON_GREEDY, seed=99)
    assert not params_equal(first.nets.online, second.nets.online)
    second.load(saved)
    assert second.nets.updates == 5
    assert params_equal(first.nets.online, second.nets.online) and params_equal(first.nets.target, second.nets.target)
    opt_a, opt_b = first.nets.optimizer.state_dict(), second.nets.optimizer.state_dict()
    assert opt_a["param_groups"] == opt_b["param_groups"]
    for key, slot in opt_a["state"].items():
        for name, value in slot.items():
            assert torch.equal(value, opt_b["state"][key][name]), (key, name)

    probe = torch.from_numpy(make_batch(50)["obs"])
    with torch.no_grad():
        assert torch.equal(first.nets.online(probe), second.nets.online(probe))
    # identical state -> identical futures (Adam moments, step counts and the target-sync phase included)
    for step in range(5, 12):
        batch = make_batch(step)
        assert first.update(batch) == second.update(batch)
    assert params_equal(first.nets.online, second.nets.online) and params_equal(first.nets.target, second.nets.target)


def test_state_holds_only_tensors_and_plain_values():
    dqn = DQN(flat_spaces(OBS_DIM, N_ACTIONS), DQNParams(net=NetConfig(hidden=(8,))), EPSILON_GREEDY, seed=0)
    dqn.update(make_batch(0))
    state = roundtrip(dqn.state())  # weights_only=True would raise on anything pickled
    assert set(state) == {"online", "target", "optimizer", "updates"}
    assert state["updates"] == 1


def test_a_pohlen_q_network_learns_returns_a_hundred_times_larger():
    """Q in h-space: the same learning rate fits returns x100 about as well as raw returns of 1, and q_mean is
    reported in raw units."""
    cfg = DQNParams(net=NetConfig(hidden=(32, 32)), learning_rate=3e-3, target_update_every=10,
                    value=ValueTransform(transform="pohlen"))
    dqn = DQN(flat_spaces(OBS_DIM, N_ACTIONS), cfg, EPSILON_GREEDY, seed=0)
    batch = make_batch(1, discount=0.0)  # no bootstrap: the target is the return itself
    batch["returns"] = (100 * (batch["returns"] + 3)).astype(np.float32)  # returns around 300
    losses = [dqn.update(batch)["td_loss"] for _ in range(400)]
    assert np.mean(losses[-10:]) < 0.05 * np.mean(losses[:10])
    with torch.no_grad():
        q = dqn.nets.online(torch.from_numpy(batch["obs"])).gather(1, torch.from_numpy(batch["actions"])[:, None])[:, 0]
    raw = dqn.codec.decode(q).numpy()
    assert np.median(np.abs(raw - batch["returns"])) < 0.05 * np.median(batch["returns"])
    assert dqn.update(batch)["q_mean"] == pytest.approx(float(raw.mean()), rel=0.05)
