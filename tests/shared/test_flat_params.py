"""shared/flat_params.py: one flat vector per MLP policy, in torch's registration order, on every side."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from shared.actors import NumpyActor
from shared.flat_params import flatten, parameter_count, policy_shapes, unflatten
from shared.manifest import default_encoder
from shared.spaces import DiscreteActions, ObsSpace, Spaces
from tests.policies import CARTPOLE, PENDULUM, manifest, policy_state

torch.set_num_threads(1)
CASES = [(CARTPOLE, "categorical"), (PENDULUM, "gaussian")]


@pytest.mark.parametrize(("spaces", "head"), CASES)
def test_shapes_follow_torch_state_dict_order(spaces, head) -> None:
    from shared.nets import PolicyNet

    m = manifest(spaces, head, (8, 5))
    torch_state = PolicyNet(m).state_dict()
    shapes = policy_shapes(m)
    assert list(shapes) == list(torch_state)
    assert [tuple(t.shape) for t in torch_state.values()] == list(shapes.values())
    assert parameter_count(shapes) == sum(t.numel() for t in torch_state.values())


@pytest.mark.parametrize(("spaces", "head"), CASES)
def test_flatten_is_torch_parameter_order_and_unflatten_inverts_it(spaces, head) -> None:
    from shared.nets import PolicyNet

    m = manifest(spaces, head, (8, 5))
    torch.manual_seed(3)
    net = PolicyNet(m)
    if head == "gaussian":
        with torch.no_grad():
            net.log_std.uniform_(-1, 0)  # not zeros, so its position in the vector is visible
    state = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    shapes = policy_shapes(m)
    vector = flatten(state, shapes)
    assert vector.dtype == np.float32
    np.testing.assert_array_equal(vector, torch.cat([t.detach().reshape(-1) for t in net.state_dict().values()]))
    back = unflatten(vector, shapes)
    assert list(back) == list(state)
    for name, tensor in state.items():
        np.testing.assert_array_equal(back[name], tensor)
    np.testing.assert_array_equal(flatten(back, shapes), vector)


@pytest.mark.parametrize(("spaces", "head"), CASES)
def test_actor_from_a_round_tripped_vector_acts_like_the_torch_net(spaces, head) -> None:
    from shared.nets import PolicyNet

    m = manifest(spaces, head, (16,))
    state = policy_state(m, seed=5)
    shapes = policy_shapes(m)
    actor = NumpyActor(m, unflatten(flatten(state, shapes), shapes))
    net = PolicyNet(m)
    net.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    obs = np.random.default_rng(0).standard_normal((32, *spaces.obs.shape)).astype(np.float32)
    with torch.no_grad():
        out = net(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(actor.forward(obs), out, rtol=1e-5, atol=1e-5)
    if head == "categorical":
        np.testing.assert_array_equal(actor.greedy(obs), out.argmax(axis=1))


def test_perturbing_the_vector_moves_the_named_weight() -> None:
    m = manifest(CARTPOLE, "categorical", (16,))
    shapes = policy_shapes(m)
    state = policy_state(m)
    vector = flatten(state, shapes).copy()
    first_hidden_bias = 4 * 16  # body.0.weight comes first
    vector[first_hidden_bias] += 1.0
    moved = unflatten(vector, shapes)
    assert moved["body.0.bias"][0] == pytest.approx(state["body.0.bias"][0] + 1.0)
    np.testing.assert_array_equal(moved["body.0.weight"], state["body.0.weight"])


def test_refusals_name_the_problem() -> None:
    m = manifest(CARTPOLE, "categorical", (16,))
    shapes = policy_shapes(m)
    state = policy_state(m)
    with pytest.raises(ValueError, match="the policy needs"):
        flatten({k: v for k, v in state.items() if k != "body.2.bias"}, shapes)
    with pytest.raises(ValueError, match=r"body\.0\.weight has shape \(4, 16\)"):
        flatten({**state, "body.0.weight": state["body.0.weight"].T}, shapes)
    with pytest.raises(ValueError, match=f"the policy has {parameter_count(shapes)} parameters"):
        unflatten(np.zeros(parameter_count(shapes) + 1, np.float32), shapes)
    image = Spaces(obs=ObsSpace(shape=(10, 10, 3), dtype="uint8"), action=DiscreteActions(n=4))
    cnn = manifest(image, "categorical")
    assert default_encoder(image.obs).kind == "cnn"
    with pytest.raises(ValueError, match="cnn encoder"):
        policy_shapes(cnn)
