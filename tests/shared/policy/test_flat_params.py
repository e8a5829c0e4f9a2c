"""One flat parameter order on both sides: torch's PolicyNet and the collectors' numpy policy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.actors import NumpyActor
from rlfleet.shared.policy.flat_params import flatten, parameter_count, policy_shapes, unflatten
from rlfleet.shared.policy.manifest import PolicyManifest, default_encoder
from rlfleet.shared.policy.nets import PolicyNet
from tests.support.policies import CARTPOLE, PENDULUM


def _manifest(spaces: Spaces, head: str) -> PolicyManifest:
    return PolicyManifest(spaces=spaces, encoder=default_encoder(spaces.obs), net=NetConfig(hidden=(16, 8)),
                          head=head)


@pytest.mark.parametrize(("spaces", "head"), [(CARTPOLE, "categorical"), (PENDULUM, "gaussian"),
                                               (PENDULUM, "gaussian_sde")])
def test_shapes_name_every_torch_tensor_and_keep_the_bodys_order(spaces: Spaces, head: str) -> None:
    manifest = _manifest(spaces, head)
    torch_state = PolicyNet(manifest).state_dict()
    shapes = policy_shapes(manifest)
    assert set(shapes) == set(torch_state)
    body = [name for name in torch_state if name.startswith("body.")]
    assert list(shapes)[:len(body)] == body
    assert all(tuple(torch_state[name].shape) == shape for name, shape in shapes.items())
    assert parameter_count(shapes) == sum(p.numel() for p in PolicyNet(manifest).parameters())


@pytest.mark.parametrize(("spaces", "head"), [(CARTPOLE, "categorical"), (PENDULUM, "gaussian"),
                                               (PENDULUM, "gaussian_sde")])
def test_unflatten_inverts_flatten_and_the_numpy_actor_matches_torch(spaces: Spaces, head: str) -> None:
    torch.manual_seed(0)
    manifest = _manifest(spaces, head)
    net = PolicyNet(manifest)
    state = {name: t.detach().numpy() for name, t in net.state_dict().items()}
    shapes = policy_shapes(manifest)
    vector = flatten(state, shapes)
    assert vector.dtype == np.float32 and vector.shape == (parameter_count(shapes),)
    back = unflatten(vector, shapes)
    assert all(np.array_equal(back[name], state[name]) for name in state)
    obs = np.random.default_rng(0).standard_normal((5, spaces.obs.flat_size)).astype(np.float32)
    with torch.no_grad():
        logits = net(torch.from_numpy(obs)).numpy()
    expected = logits.argmax(1) if head == "categorical" else np.clip(logits[:, :1], -2.0, 2.0)  # sde: mean, latent
    np.testing.assert_allclose(np.asarray(NumpyActor(manifest, back).greedy(obs), np.float64).reshape(
        expected.shape), expected, atol=1e-5)


def test_a_moved_vector_moves_the_named_tensor() -> None:
    manifest = _manifest(CARTPOLE, "categorical")
    shapes = policy_shapes(manifest)
    vector = np.zeros(parameter_count(shapes), np.float32)
    vector[4 * 16] = 1.0  # the first entry after body.0.weight (16 x 4): body.0.bias[0]
    state = unflatten(vector, shapes)
    assert state["body.0.bias"][0] == 1.0 and state["body.0.weight"].sum() == 0.0


def test_mismatched_tensors_and_vectors_are_refused() -> None:
    manifest = _manifest(CARTPOLE, "categorical")
    shapes = policy_shapes(manifest)
    state = {name: np.zeros(shape, np.float32) for name, shape in shapes.items()}
    with pytest.raises(ValueError, match="tensors"):
        flatten({k: v for k, v in state.items() if k != "body.0.bias"}, shapes)
    with pytest.raises(ValueError, match="shape"):
        flatten(state | {"body.0.bias": np.zeros(3, np.float32)}, shapes)
    with pytest.raises(ValueError, match="parameters"):
        unflatten(np.zeros(7, np.float32), shapes)
