"""Recurrent cores: the numpy step equals torch's GRU and LSTM on the same weights, actors carry one state per env
and reset it where told, a non-finite state is caught, and a sequence with a reset inside equals two sequences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.shared.config.base import CoreConfig, NetConfig
from rlfleet.shared.payloads.spaces import DiscreteActions, ObsSpace, Spaces
from rlfleet.shared.policy.actors import NumpyActor, PolicyError, TorchActor, build_actor
from rlfleet.shared.policy.files import decode_policy, policy_bytes
from rlfleet.shared.policy.manifest import PolicyManifest, default_encoder
from rlfleet.shared.policy.nets import Core, PolicyNet
from rlfleet.shared.policy.recurrent import NumpyCore
from tests.support.policies import CARTPOLE, PENDULUM

torch.set_num_threads(1)
KINDS = ("gru", "lstm")
IMAGE = Spaces(obs=ObsSpace(shape=(10, 10, 3), dtype="uint8"), action=DiscreteActions(n=4))


def recurrent_manifest(kind: str, spaces: Spaces = CARTPOLE, head: str = "categorical",
                       hidden: int = 8) -> PolicyManifest:
    return PolicyManifest(spaces=spaces, encoder=default_encoder(spaces.obs), net=NetConfig(hidden=(16,)), head=head,
                          core=CoreConfig(kind=kind, hidden=hidden))


def net_and_state(m: PolicyManifest, seed: int = 0) -> tuple[PolicyNet, dict[str, np.ndarray]]:
    torch.manual_seed(seed)
    net = PolicyNet(m).eval()
    return net, {k: v.numpy().copy() for k, v in net.state_dict().items()}


def observations(spaces: Spaces, steps: int, envs: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if spaces.obs.dtype == "uint8":
        return rng.integers(0, 256, (steps, envs, *spaces.obs.shape)).astype(np.uint8)
    return rng.standard_normal((steps, envs, *spaces.obs.shape)).astype(np.float32)


@pytest.mark.parametrize("kind", KINDS)
def test_the_numpy_cell_equals_torchs_layer_step_by_step(kind: str) -> None:
    config = CoreConfig(kind=kind, hidden=16)
    torch.manual_seed(3)
    core = Core(config, 5)
    cell = NumpyCore(config, 5, {f"core.{k}": v.numpy() for k, v in core.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((20, 7, 5)).astype(np.float32) * 3
    with torch.no_grad():
        want, final = core(torch.from_numpy(x), core.initial(7))
    state = np.zeros((7, *config.state_shape), np.float32)
    for t in range(20):
        out, state = cell.step(x[t], state)
        np.testing.assert_allclose(out, want[t].numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state, final.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("spaces", [CARTPOLE, IMAGE])
def test_an_actor_with_a_core_acts_as_the_learners_network_over_a_sequence_with_resets(kind: str,
                                                                                       spaces: Spaces) -> None:
    m = recurrent_manifest(kind, spaces)
    net, state = net_and_state(m, seed=1)
    actor = build_actor(m, state)
    assert isinstance(actor, NumpyActor if spaces is CARTPOLE else TorchActor) and actor.recurrent
    obs = observations(spaces, 12, 3)
    starts = np.zeros((12, 3), bool)
    starts[5, 1] = starts[9, 0] = True  # env 1's episode ends after row 4, env 0's after row 8
    with torch.no_grad():
        hidden, _ = net.sequence_hidden(torch.from_numpy(obs), net.core.initial(3), torch.from_numpy(starts))
        want = net.head(hidden).numpy()
    for t in range(12):
        actor.reset(starts[t])
        np.testing.assert_allclose(actor.forward(obs[t]), want[t], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_a_sequence_with_a_reset_inside_equals_its_two_parts(kind: str) -> None:
    torch.manual_seed(0)
    core = Core(CoreConfig(kind=kind, hidden=6), 4)
    x, state = torch.randn(10, 3, 4), torch.randn(3, *core.config.state_shape)
    starts = torch.zeros(10, 3, dtype=torch.bool)
    starts[6] = True  # every env starts an episode at row 6
    with torch.no_grad():
        joined, final = core(x, state, starts)
        first, _ = core(x[:6], state)
        second, second_final = core(x[6:], core.initial(3))
        stepped, after = core.states(x, state, starts)
    torch.testing.assert_close(joined, torch.cat([first, second]))
    torch.testing.assert_close(final, second_final)
    torch.testing.assert_close(stepped, joined)
    torch.testing.assert_close(after[-1], final)


@pytest.mark.parametrize("kind", KINDS)
def test_the_state_after_every_row_is_the_state_one_row_at_a_time_reaches(kind: str) -> None:
    torch.manual_seed(1)
    core = Core(CoreConfig(kind=kind, hidden=5), 3)
    x, state = torch.randn(7, 4, 3), torch.randn(4, *core.config.state_shape)
    starts = torch.zeros(7, 4, dtype=torch.bool)
    starts[2, 1] = starts[5, 3] = starts[0, 2] = True  # resets of single envs, one on the first row
    with torch.no_grad():
        outputs, after = core.states(x, state, starts)
        carried, want_out, want_after = state, [], []
        for t in range(7):
            carried = carried * (~starts[t]).float().reshape(4, *([1] * (state.ndim - 1)))
            out, carried = core(x[t:t + 1], carried)
            want_out.append(out[0])
            want_after.append(carried)
    torch.testing.assert_close(outputs, torch.stack(want_out))
    torch.testing.assert_close(after, torch.stack(want_after))


def test_a_reset_zeroes_only_the_envs_told_and_reset_forgets_every_env() -> None:
    m = recurrent_manifest("gru")
    actor = build_actor(m, net_and_state(m)[1])
    assert not actor.core_state(4).any()  # zero at first
    actor.forward(observations(CARTPOLE, 1, 4)[0])
    before = actor.core_state(4)
    assert before is not None and (np.abs(before) > 0).all(axis=1).all()
    actor.reset(np.array([False, True, False, False]))
    after = actor.core_state(4)
    assert after is not None and not after[1].any()
    np.testing.assert_array_equal(after[[0, 2, 3]], before[[0, 2, 3]])
    actor.reset()
    assert not actor.core_state(4).any()


def test_a_new_actor_continues_from_the_state_of_the_one_before() -> None:
    m = recurrent_manifest("lstm")
    old, new = build_actor(m, net_and_state(m, 0)[1]), build_actor(m, net_and_state(m, 1)[1])
    old.forward(observations(CARTPOLE, 1, 2)[0])
    new.load_core_state(old.core_state(2))
    np.testing.assert_array_equal(new.core_state(2), old.core_state(2))


def test_a_non_finite_state_is_flagged_and_that_env_acts_from_a_zero_state() -> None:
    m = recurrent_manifest("gru")
    net, state = net_and_state(m)
    actor = build_actor(m, state)
    obs = observations(CARTPOLE, 1, 3)[0]
    actor.load_core_state(np.array([[0.0] * 8, [np.nan] * 8, [0.5] * 8], np.float32))
    decision = actor.act(obs, explore=False, rng=np.random.default_rng(0))
    assert decision.broken is not None and decision.broken.tolist() == [False, True, False]
    fresh = build_actor(m, state)
    np.testing.assert_array_equal(decision.actions[1], fresh.act(obs[1:2], False, np.random.default_rng(0)).actions[0])
    assert not actor.core_state(3)[1].any()  # the broken env's memory restarts from zero
    assert np.isfinite(actor.core_state(3)).all()
    assert actor.act(obs, explore=False, rng=np.random.default_rng(0)).broken is None


def test_memoryless_actors_take_the_state_calls_and_do_nothing() -> None:
    m = PolicyManifest(spaces=PENDULUM, encoder=default_encoder(PENDULUM.obs), net=NetConfig(hidden=(4,)),
                       head="gaussian")
    actor = build_actor(m, net_and_state(m)[1])
    actor.reset(np.array([True]))
    actor.load_core_state(np.zeros((1, 4), np.float32))
    assert actor.core_state(1) is None and not actor.recurrent


def test_a_manifest_without_a_core_writes_no_core_key_and_one_with_a_core_round_trips() -> None:
    plain = PolicyManifest(spaces=CARTPOLE, encoder=default_encoder(CARTPOLE.obs), net=NetConfig(hidden=(4,)),
                           head="categorical")
    assert '"core"' not in plain.to_json()
    m = recurrent_manifest("lstm")
    assert '"core":{"hidden":8,"kind":"lstm"}' in m.to_json()
    net, state = net_and_state(m)
    decoded, tensors = decode_policy(policy_bytes(net.state_dict(), m))
    assert decoded == m and set(tensors) == set(state)


def test_a_policy_file_without_the_cores_weights_is_refused() -> None:
    m = recurrent_manifest("gru")
    state = net_and_state(m)[1]
    del state["core.rnn.bias_hh_l0"]
    with pytest.raises(PolicyError, match="core.rnn.bias_hh_l0"):
        build_actor(m, state)
    wrong = net_and_state(recurrent_manifest("gru", hidden=4))[1]
    with pytest.raises(PolicyError):
        build_actor(m, wrong)
