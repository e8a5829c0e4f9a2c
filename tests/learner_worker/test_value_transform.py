"""Pohlen's transform, the two-hot support projection and the value codec a learner trains its values with."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rlfleet.learner_worker.value_transform import ValueCodec, h, h_inv, scalar_to_support, support_to_scalar
from rlfleet.shared.config.values import CriticValue, Support, ValueTransform

torch.set_num_threads(1)

VALUES = st.floats(-1e5, 1e5, allow_nan=False)
EPS = st.sampled_from([1e-3, 1e-2, 0.1])


@given(VALUES, EPS)
def test_h_inverse_undoes_h(x: float, eps: float) -> None:
    t = torch.tensor(x, dtype=torch.float64)
    assert h_inv(h(t, eps), eps).item() == pytest.approx(x, rel=1e-9, abs=1e-9)


@given(st.floats(-500, 500, allow_nan=False), EPS)
def test_h_undoes_h_inverse(y: float, eps: float) -> None:
    t = torch.tensor(y, dtype=torch.float64)
    assert h(h_inv(t, eps), eps).item() == pytest.approx(y, rel=1e-9, abs=1e-9)


def test_h_squashes_like_a_square_root_and_keeps_order() -> None:
    x = torch.tensor([-10_000.0, -100.0, -1.0, 0.0, 1.0, 100.0, 10_000.0], dtype=torch.float64)
    y = h(x, 1e-3)
    assert torch.all(y[1:] > y[:-1])  # increasing: a greedy argmax is the same in either space
    assert y[3] == 0 and y[-1].item() == pytest.approx(np.sqrt(10_001) - 1 + 10, rel=1e-12)
    assert torch.equal(y, -h(-x, 1e-3))


SUPPORT = Support(min=-5.0, max=5.0, bins=11)


@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=32))
def test_a_value_inside_the_support_round_trips(values: list[float]) -> None:
    x = torch.tensor(values, dtype=torch.float64)
    probs = scalar_to_support(x, SUPPORT)
    assert probs.shape == (len(values), 11)
    assert torch.all(probs >= 0) and torch.allclose(probs.sum(-1), torch.ones(len(values), dtype=torch.float64))
    assert (probs > 0).sum(-1).max() <= 2  # two-hot
    assert torch.allclose(support_to_scalar(probs, SUPPORT), x, atol=1e-9)


def test_values_beyond_the_support_are_clamped_to_its_ends() -> None:
    probs = scalar_to_support(torch.tensor([-80.0, 9.0]), SUPPORT)
    assert probs[0, 0] == 1 and probs[1, -1] == 1
    assert support_to_scalar(probs, SUPPORT).tolist() == [-5.0, 5.0]


def test_the_codec_of_a_plain_scalar_value_is_the_old_squared_error() -> None:
    codec = ValueCodec(CriticValue())
    out, targets = torch.tensor([[1.0], [3.0]]), torch.tensor([2.0, 2.0])
    assert codec.outputs == 1
    assert codec.values(out).tolist() == [1.0, 3.0]
    assert codec.loss(out, targets).tolist() == [0.5, 0.5]


def test_a_pohlen_scalar_trains_in_h_space_and_reads_raw_values() -> None:
    codec = ValueCodec(ValueTransform(transform="pohlen"))
    targets = torch.tensor([0.0, 400.0, -9000.0], dtype=torch.float64)
    trained = codec.encode(targets)
    assert codec.loss(trained[:, None], targets).abs().max() < 1e-20
    assert torch.allclose(codec.values(trained[:, None]), targets)


def test_a_categorical_critic_fits_its_targets() -> None:
    value = CriticValue(transform="pohlen", head="categorical", support=Support(min=-25, max=25, bins=51),
                        max_abs_return=500)
    codec = ValueCodec(value)
    torch.manual_seed(0)
    obs = torch.randn(64, 3)
    targets = 200 * obs[:, 0] + 150  # returns of order 100, as on CartPole
    net = torch.nn.Sequential(torch.nn.Linear(3, 64), torch.nn.Tanh(), torch.nn.Linear(64, codec.outputs))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(600):
        loss = codec.loss(net(obs), targets).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        out = net(obs)
    assert torch.allclose(out.softmax(-1).sum(-1), torch.ones(64), atol=1e-5)
    error = (codec.values(out) - targets).abs()
    assert error.median() < 0.05 * targets.abs().median(), error.median()
