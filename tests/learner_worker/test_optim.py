"""The learners' optimizers against torch.optim, step by step, and their checkpoints."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable

import pytest
import torch

from learner_worker.optim import SGD, Adam, Optimizer, RMSprop

Params = list[torch.nn.Parameter]
Pair = tuple[Callable[[Params], Optimizer], Callable[[Params], torch.optim.Optimizer]]
PAIRS: dict[str, Pair] = {
    "adam": (lambda p: Adam(p, lr=1e-2, eps=1e-5), lambda p: torch.optim.Adam(p, lr=1e-2, eps=1e-5)),
    "adam_l2": (lambda p: Adam(p, lr=1e-2, weight_decay=0.1), lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.1)),
    "adamw": (lambda p: Adam(p, lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1, decoupled=True),
              lambda p: torch.optim.AdamW(p, lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1)),
    "rmsprop": (lambda p: RMSprop(p, lr=1e-3, alpha=0.9, eps=1e-5),
                lambda p: torch.optim.RMSprop(p, lr=1e-3, alpha=0.9, eps=1e-5)),
    "sgd": (lambda p: SGD(p, lr=0.05), lambda p: torch.optim.SGD(p, lr=0.05)),
    "sgd_momentum": (lambda p: SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01),
                     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01)),
}


def _net(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def _train(net: torch.nn.Module, opt: Optimizer | torch.optim.Optimizer, steps: range) -> None:
    for step in steps:
        gen = torch.Generator().manual_seed(step)
        x, y = torch.randn(32, 5, generator=gen), torch.randn(32, 3, generator=gen)
        opt.zero_grad()
        (net(x) - y).square().mean().backward()
        opt.step()


def _roundtrip(state: dict) -> dict:
    """As a learner checkpoint persists it: torch.save, then torch.load without pickle."""
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_each_step_moves_the_parameters_as_torch_optim_does(name: str) -> None:
    mine_net, theirs_net = _net(), _net()
    mine, theirs = PAIRS[name][0](list(mine_net.parameters())), PAIRS[name][1](list(theirs_net.parameters()))
    for step in range(25):
        _train(mine_net, mine, range(step, step + 1))
        _train(theirs_net, theirs, range(step, step + 1))
        for a, b in zip(mine_net.parameters(), theirs_net.parameters(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_a_checkpoint_of_torch_optim_resumes_here_as_it_would_there(name: str) -> None:
    """Learner checkpoints written before these classes hold torch.optim state dicts."""
    make_mine, make_theirs = PAIRS[name]
    theirs_net = _net()
    theirs = make_theirs(list(theirs_net.parameters()))
    _train(theirs_net, theirs, range(10))
    mine_net = _net(seed=1)
    mine_net.load_state_dict(theirs_net.state_dict())
    mine = make_mine(list(mine_net.parameters()))
    mine.load_state_dict(_roundtrip(theirs.state_dict()))
    _train(theirs_net, theirs, range(10, 20))
    _train(mine_net, mine, range(10, 20))
    for a, b in zip(mine_net.parameters(), theirs_net.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_resuming_from_its_own_state_dict_is_bit_for_bit_the_same_run(name: str) -> None:
    make = PAIRS[name][0]
    straight_net = _net()
    straight = make(list(straight_net.parameters()))
    _train(straight_net, straight, range(12))
    first_net = _net()
    first = make(list(first_net.parameters()))
    _train(first_net, first, range(6))
    saved = _roundtrip({"net": first_net.state_dict(), "optimizer": first.state_dict()})
    second_net = _net(seed=7)
    second_net.load_state_dict(saved["net"])
    second = make(list(second_net.parameters()))
    second.load_state_dict(saved["optimizer"])
    _train(second_net, second, range(6, 12))
    for a, b in zip(second_net.parameters(), straight_net.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_parameter_without_a_gradient_is_left_alone() -> None:
    frozen, trained = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3))
    opt = Adam([frozen, trained], lr=0.1)
    trained.sum().backward()
    opt.step()
    assert torch.equal(frozen, torch.ones(3)) and not torch.equal(trained, torch.ones(3))
    assert set(opt.state_dict()["state"]) == {1}


def test_a_state_for_other_parameters_is_refused() -> None:
    opt = Adam(list(_net().parameters()))
    other = Adam([torch.nn.Parameter(torch.ones(2))])
    with pytest.raises(ValueError, match="parameters"):
        opt.load_state_dict(other.state_dict())
    with pytest.raises(ValueError, match="no parameters"):
        Adam([])


def test_a_state_missing_a_slot_is_refused() -> None:
    net = _net()
    opt = SGD(list(net.parameters()), lr=0.1, momentum=0.9)
    plain = SGD(list(_net().parameters()), lr=0.1)  # no momentum: no buffers
    _train(net, plain, range(2))
    with pytest.raises(ValueError, match="momentum_buffer"):
        opt.load_state_dict(_roundtrip({"state": {0: {}}, "param_groups": plain.state_dict()["param_groups"]}))


def test_training_never_imports_torch_dynamo() -> None:
    """The point of these classes (learner_worker/optim.py): a learner that builds, steps and checkpoints an
    algorithm does not pay torch._dynamo's second at start-up. A fresh interpreter, as a learner is."""
    script = """
import sys, torch
from learner_worker.algorithms.dqn import DQN
from learner_worker.algorithms.ppo import PPO
from shared.algorithms.dqn import DQNParams
from shared.algorithms.ppo import PPOParams
from tests.support.learner_data import make_batch, make_chunk
from tests.support.policies import EPSILON_GREEDY, SAMPLING, flat_spaces
ppo = PPO(flat_spaces(4, 3), PPOParams(), SAMPLING, seed=0)
ppo.update([make_chunk(0)])
dqn = DQN(flat_spaces(4, 3), DQNParams(), EPSILON_GREEDY, seed=0)
dqn.update(make_batch(0))
ppo.load(ppo.state()); dqn.load(dqn.state())
print(sorted(m for m in sys.modules if m.startswith("torch._dynamo")))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
