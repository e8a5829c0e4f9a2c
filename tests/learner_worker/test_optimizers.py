"""The learners' optimizers (learner_worker/optimizers.py): torch.optim's update rules with the chosen kernels,
checkpoints of every earlier layout resuming, and the build kept off the learner's main thread."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from rlfleet.learner_worker.algorithms.a2c import A2C
from rlfleet.learner_worker.algorithms.ppo import PPO
from rlfleet.learner_worker.checkpoint import Checkpoint, load_latest_checkpoint, save_checkpoint
from rlfleet.learner_worker.optimizers import BackgroundOptimizer
from rlfleet.shared.algorithms.a2c import A2CParams
from rlfleet.shared.algorithms.ppo import PPOParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.storage.local import LocalStore
from tests.support.learner_data import N_ACTIONS, OBS_DIM, make_chunk, params_equal, roundtrip
from tests.support.policies import SAMPLING, flat_spaces

torch.set_num_threads(1)


@dataclass(frozen=True)
class Case:
    """An optimizer as a learner builds it, and what learner_worker/optim.py (the learners' own optimizers until
    torch.optim replaced them) wrote in a checkpoint for the same settings: its group held the hyperparameters
    its constructor took, its state the slots its update read."""

    kind: type[torch.optim.Optimizer]
    hyper: dict[str, Any]
    old_group: dict[str, Any]
    old_slots: tuple[str, ...]


ADAM_SLOTS = ("step", "exp_avg", "exp_avg_sq")
CASES = {
    "adam": Case(torch.optim.Adam, {"lr": 1e-2, "eps": 1e-5},
                 {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-5, "weight_decay": 0.0, "decoupled": False},
                 ADAM_SLOTS),
    "adam_l2": Case(torch.optim.Adam, {"lr": 1e-2, "weight_decay": 0.1},
                    {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.1, "decoupled": False},
                    ADAM_SLOTS),
    "adamw": Case(torch.optim.AdamW, {"lr": 1e-2, "betas": (0.8, 0.99), "weight_decay": 0.1},
                  {"lr": 1e-2, "betas": (0.8, 0.99), "eps": 1e-8, "weight_decay": 0.1, "decoupled": True},
                  ADAM_SLOTS),
    "rmsprop": Case(torch.optim.RMSprop, {"lr": 1e-3, "alpha": 0.9, "eps": 1e-5},
                    {"lr": 1e-3, "alpha": 0.9, "eps": 1e-5}, ("square_avg",)),
    "sgd": Case(torch.optim.SGD, {"lr": 0.05}, {"lr": 0.05, "momentum": 0.0, "weight_decay": 0.0}, ()),
    "sgd_momentum": Case(torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01},
                         {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01}, ("momentum_buffer",)),
}


def _net(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def _reference(case: Case, net: torch.nn.Module) -> torch.optim.Optimizer:
    """torch.optim's per-tensor implementation, the plainest statement of the update rule."""
    return case.kind(list(net.parameters()), **{**case.hyper, "foreach": False})


def _train(net: torch.nn.Module, opt: BackgroundOptimizer | torch.optim.Optimizer, steps: range) -> None:
    for step in steps:
        gen = torch.Generator().manual_seed(step)
        x, y = torch.randn(32, 5, generator=gen), torch.randn(32, 3, generator=gen)
        opt.zero_grad()
        (net(x) - y).square().mean().backward()
        opt.step()


def _through_a_checkpoint(tmp_path: Path, algo: dict) -> dict:
    """`algo` written as a learner checkpoint and read back as a resuming learner reads it."""
    store = LocalStore(tmp_path)
    save_checkpoint(store, Checkpoint(iteration=10, policy_version=1, transitions_trained=320, algo=algo))
    ckpt = load_latest_checkpoint(store)
    assert ckpt is not None
    return ckpt.algo


def _old_layout(case: Case, reference: torch.optim.Optimizer) -> dict[str, Any]:
    """The state dict learner_worker/optim.py would have written where torch.optim's `reference` is: per parameter
    index the slots it kept (the same tensors: its updates matched torch.optim's), one group of the hyperparameters
    its constructor took (the reference's values where torch.optim has the same key)."""
    state, group = reference.state_dict(), reference.param_groups[0]
    count = len(group["params"])
    return {"state": {i: {slot: state["state"][i][slot].clone() for slot in case.old_slots} for i in range(count)},
            "param_groups": [{**{key: group.get(key, value) for key, value in case.old_group.items()},
                              "params": list(range(count))}]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_step_moves_the_parameters_as_torch_optims_reference_does(name: str) -> None:
    """The fused / foreach kernels chosen for speed keep the update rule."""
    case = CASES[name]
    mine_net, theirs_net = _net(), _net()
    mine, theirs = BackgroundOptimizer(case.kind, mine_net.parameters(), **case.hyper), _reference(case, theirs_net)
    for step in range(25):
        _train(mine_net, mine, range(step, step + 1))
        _train(theirs_net, theirs, range(step, step + 1))
        for a, b in zip(mine_net.parameters(), theirs_net.parameters(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_checkpoint_of_the_learners_own_optimizers_resumes_as_it_would_have(name: str, tmp_path: Path) -> None:
    """Checkpoints written before torch.optim came back hold learner_worker/optim.py's layout."""
    case = CASES[name]
    theirs_net = _net()
    theirs = _reference(case, theirs_net)
    _train(theirs_net, theirs, range(10))
    saved = _through_a_checkpoint(tmp_path, {"net": theirs_net.state_dict(), "optimizer": _old_layout(case, theirs)})
    mine_net = _net(seed=1)
    mine_net.load_state_dict(saved["net"])
    mine = BackgroundOptimizer(case.kind, mine_net.parameters(), **case.hyper)
    mine.load_state_dict(saved["optimizer"])
    _train(theirs_net, theirs, range(10, 20))
    _train(mine_net, mine, range(10, 20))
    for a, b in zip(mine_net.parameters(), theirs_net.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_resuming_from_its_own_checkpoint_is_bit_for_bit_the_same_run(name: str, tmp_path: Path) -> None:
    make = CASES[name]
    straight_net = _net()
    straight = BackgroundOptimizer(make.kind, straight_net.parameters(), **make.hyper)
    _train(straight_net, straight, range(12))
    first_net = _net()
    first = BackgroundOptimizer(make.kind, first_net.parameters(), **make.hyper)
    _train(first_net, first, range(6))
    saved = _through_a_checkpoint(tmp_path, {"net": first_net.state_dict(), "optimizer": first.state_dict()})
    second_net = _net(seed=7)
    second_net.load_state_dict(saved["net"])
    second = BackgroundOptimizer(make.kind, second_net.parameters(), **make.hyper)
    second.load_state_dict(saved["optimizer"])
    _train(second_net, second, range(6, 12))
    for a, b in zip(second_net.parameters(), straight_net.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_resumed_optimizer_keeps_the_runs_hyperparameters_and_kernel() -> None:
    """A checkpoint's group (torch.optim's default kernel, another learning rate) does not override the config."""
    net = _net()
    saved = torch.optim.Adam(list(net.parameters()), lr=0.5, eps=1e-3)
    _train(net, saved, range(2))
    mine = BackgroundOptimizer(torch.optim.Adam, _net().parameters(), lr=1e-2, eps=1e-5)
    mine.load_state_dict(roundtrip(saved.state_dict()))
    group = mine.optimizer.param_groups[0]
    assert (group["lr"], group["eps"], group["fused"]) == (1e-2, 1e-5, True)
    assert torch.equal(mine.state_dict()["state"][0]["exp_avg"], saved.state_dict()["state"][0]["exp_avg"])


def test_a_state_for_other_parameters_is_refused() -> None:
    opt = BackgroundOptimizer(torch.optim.Adam, _net().parameters())
    other = BackgroundOptimizer(torch.optim.Adam, [torch.nn.Parameter(torch.ones(2))])
    with pytest.raises(ValueError, match="another network's"):
        opt.load_state_dict(other.state_dict())
    with pytest.raises(ValueError, match="no parameters"):
        BackgroundOptimizer(torch.optim.Adam, [])
    with pytest.raises(TypeError, match="KERNELS"):
        BackgroundOptimizer(torch.optim.Adagrad, _net().parameters())


def test_a_state_missing_a_slot_is_refused() -> None:
    net = _net()
    opt = BackgroundOptimizer(torch.optim.SGD, net.parameters(), lr=0.1, momentum=0.9)
    plain = torch.optim.SGD(list(_net().parameters()), lr=0.1)  # no momentum: no buffers
    with pytest.raises(ValueError, match="momentum_buffer"):
        opt.load_state_dict(roundtrip({"state": {0: {}}, "param_groups": plain.state_dict()["param_groups"]}))


def test_a_bad_hyperparameter_is_raised_where_the_learner_first_steps() -> None:
    net = _net()
    opt = BackgroundOptimizer(torch.optim.Adam, net.parameters(), lr=-1.0)
    with pytest.raises(ValueError, match="learning rate"):
        _train(net, opt, range(1))


def test_construction_does_not_wait_for_the_build() -> None:
    """The learner's constructor returns while torch.optim is still being built (here: held until a gate opens),
    and its first step waits for it."""
    net = _net()
    gate, built = threading.Event(), threading.Event()

    class Held(torch.optim.SGD):
        def __init__(self, params: Any, **hyper: Any) -> None:
            if not gate.wait(timeout=10):
                raise RuntimeError("the optimizer was built on the constructing thread")
            super().__init__(params, **hyper)
            built.set()

    opt = BackgroundOptimizer(Held, net.parameters(), lr=0.1)
    assert not built.is_set()
    gate.set()
    _train(net, opt, range(1))
    assert built.is_set() and isinstance(opt.optimizer, Held)


@pytest.mark.parametrize(("case", "make"), [
    ("adam", lambda seed: PPO(flat_spaces(OBS_DIM, N_ACTIONS), PPOParams(net=NetConfig(hidden=(16, 16))), SAMPLING,
                              seed=seed)),
    ("rmsprop", lambda seed: A2C(flat_spaces(OBS_DIM, N_ACTIONS), A2CParams(net=NetConfig(hidden=(16, 16))),
                                 SAMPLING, seed=seed)),
], ids=["ppo", "a2c"])
def test_a_learner_resumes_a_checkpoint_written_before_torch_optim(case: str, make: Any, tmp_path: Path) -> None:
    """A whole learner checkpoint as today's learners wrote it (the optimizer in learner_worker/optim.py's layout)
    resumes into a learner that then trains exactly as the one that wrote it."""
    writer = make(0)
    writer.update([make_chunk(0)])
    state = writer.state()
    state["optimizer"] = _old_layout(CASES[case], writer.optimizer.optimizer)
    resumed = make(1)
    resumed.load(_through_a_checkpoint(tmp_path, state))
    chunks = [make_chunk(1), make_chunk(2)]
    assert writer.update(chunks) == resumed.update(chunks)
    assert params_equal(writer.actor, resumed.actor) and params_equal(writer.critic, resumed.critic)


def test_a_learners_main_thread_never_imports_torch_dynamo() -> None:
    """The reason the build runs in a thread: torch.optim imports torch._dynamo (a second of CPU), and a learner
    that builds, steps and checkpoints an algorithm must not pay it on its main thread, whose first policy
    collectors wait for. A fresh interpreter, as a learner is; an import hook names the thread importing it."""
    script = """
import json, sys, threading, torch
importers = []
class Witness:
    def find_spec(self, name, path=None, target=None):
        if name == "torch._dynamo":
            importers.append(threading.current_thread().name)
        return None
sys.meta_path.insert(0, Witness())
from rlfleet.learner_worker.algorithms.dqn import DQN
from rlfleet.learner_worker.algorithms.ppo import PPO
from rlfleet.shared.algorithms.dqn import DQNParams
from rlfleet.shared.algorithms.ppo import PPOParams
from tests.support.learner_data import make_chunk
from tests.support.policies import EPSILON_GREEDY, SAMPLING, flat_spaces
import numpy as np
rng = np.random.default_rng(0)
batch = {"obs": rng.normal(size=(8, 4)).astype(np.float32), "actions": rng.integers(0, 3, 8),
         "returns": rng.normal(size=8).astype(np.float32), "boot_obs": rng.normal(size=(8, 4)).astype(np.float32),
         "discount": np.full(8, 0.9, np.float32)}
ppo = PPO(flat_spaces(4, 3), PPOParams(), SAMPLING, seed=0)
ppo.policy_state()
ppo.update([make_chunk(0)])
dqn = DQN(flat_spaces(4, 3), DQNParams(), EPSILON_GREEDY, seed=0)
dqn.update(batch)
ppo.load(ppo.state()); dqn.load(dqn.state())
print(json.dumps(importers))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    importers = json.loads(out.stdout)
    assert importers and "MainThread" not in importers, out.stdout
