"""r2d2's loss pieces: the sequence priority, double-Q n-step targets through h, no gradient through the burn-in,
untrained rows kept out of the loss, and an update that trains the core and resumes from its state."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rlfleet.learner_worker.algorithms.r2d2 import R2D2, bootstrap_targets, sequence_priority
from rlfleet.learner_worker.value_transform import ValueCodec, h, h_inv
from rlfleet.shared.algorithms.r2d2 import R2D2Params
from rlfleet.shared.config.base import CoreConfig, NetConfig
from rlfleet.shared.config.values import ValueTransform
from rlfleet.shared.policy.manifest import Behaviour
from tests.support.learner_data import params_equal, roundtrip
from tests.support.sequences import HIDDEN, SPACES, StoredSequences, core_chunk

torch.set_num_threads(1)
BEHAVIOUR = Behaviour(head="q_values", sample=False)


def small(kind: str = "gru", **changes: object) -> R2D2Params:
    return R2D2Params(net=NetConfig(hidden=(16,), core=CoreConfig(kind=kind, hidden=HIDDEN)), n_step=3,
                      batch_size=4, **changes)


def batch(tmp_path: Path, items: list[tuple[int, int, int]], length: int = 4, burn_in: int = 3,
          seed: int = 0, kind: str = "gru") -> dict[str, np.ndarray]:
    chunks = [core_chunk(seed, kind=kind), core_chunk(seed + 1, kind=kind)]
    for chunk in chunks:
        chunk["terminated"][:] = chunk["truncated"][:] = False
    stored = StoredSequences(tmp_path, chunks, kind)
    (out,) = stored.cache(burn_in=burn_in, n_step=3).batches(stored.sample(items, length, len(items)))
    return out


def test_the_priority_mixes_the_max_and_the_mean_of_the_trained_rows() -> None:
    td = torch.tensor([[1.0, 4.0, 9.0], [3.0, 0.0, 9.0], [5.0, 2.0, 9.0]])
    trained = torch.tensor([[True, True, False], [True, True, False], [False, True, False]])
    got = sequence_priority(td, trained, eta=0.9)
    # column 0: rows 0 and 1 (row 2 untrained); column 1: all three; column 2: nothing trained
    torch.testing.assert_close(got, torch.tensor([0.9 * 3 + 0.1 * 2, 0.9 * 4 + 0.1 * 2, 0.0]))
    torch.testing.assert_close(sequence_priority(td, trained, eta=0.0), torch.tensor([2.0, 2.0, 0.0]))


def test_targets_are_double_q_n_step_returns_through_h() -> None:
    codec = ValueCodec(ValueTransform(transform="pohlen", eps=1e-3))
    q_online = torch.tensor([[0.1, 0.9, 0.5], [2.0, 0.0, 1.0]])  # picks action 1, then action 0
    q_target = torch.tensor([[7.0, 3.0, 5.0], [4.0, 8.0, 6.0]])  # values them (not its own max)
    returns, discount = torch.tensor([2.0, 1.0]), torch.tensor([0.9**3, 0.0])
    got = bootstrap_targets(codec, returns, discount, q_target, q_online, None)
    want = h(torch.tensor([2.0 + 0.9**3 * h_inv(torch.tensor(3.0), 1e-3).item(), 1.0]), 1e-3)
    torch.testing.assert_close(got, want)
    # an action mask: the online network's best legal action
    legal = torch.tensor([[True, False, True], [True, True, True]])
    got = bootstrap_targets(codec, returns, discount, q_target, q_online, legal)
    assert got[0].item() == pytest.approx(h(torch.tensor(2.0 + 0.9**3 * h_inv(torch.tensor(5.0), 1e-3).item()),
                                            1e-3).item(), rel=1e-6)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_no_gradient_reaches_the_burn_in_rows(tmp_path: Path, kind: str) -> None:
    """Two sequences starting at row 5 after a burn-in, and the same rows served as sequences starting at row 0 from
    the state the burn-in reaches: the same loss and the same gradients, so the burn-in rows add none."""
    full = batch(tmp_path / "a", [(0, 5, 0), (1, 5, 1)], kind=kind)
    assert (full["first"] == 5).all()
    learner = R2D2(SPACES, small(kind), BEHAVIOUR, seed=0)
    with torch.no_grad():
        core = learner.nets.online.core
        assert core is not None
        _, after = core.states(learner.nets.online.core_input(torch.from_numpy(full["obs"])),
                               torch.from_numpy(full["state"]), torch.from_numpy(full["starts"]))
    cut = {**full, "obs": full["obs"][5:], "next_obs": full["next_obs"][5:], "starts": full["starts"][5:],
           "state": after[4].numpy(), "first": np.zeros(2, np.int64), "boot": full["boot"] - 5}
    grads = []
    for b in (full, cut):
        fresh = R2D2(SPACES, small(kind), BEHAVIOUR, seed=0)
        loss, _, _, trained = fresh.td_loss(b)
        assert trained.all()
        loss.backward()
        params = fresh.nets.online.parameters()
        grads.append([torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in params])
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert all(g.abs().sum() > 0 for g in grads[0])  # every weight learns from the sequences' own rows


def test_rows_that_are_not_trained_never_reach_the_loss(tmp_path: Path) -> None:
    b = batch(tmp_path, [(0, 0, 0), (1, 1, 1), (0, 6, 1), (1, 4, 0)], burn_in=3)
    untrained = ~b["trained"]
    assert untrained.any() and b["trained"].any()
    changed = {**b, "returns": np.where(untrained, 1e6, b["returns"]).astype(np.float32),
               "actions": np.where(untrained, 2 - b["actions"], b["actions"])}
    losses = [R2D2(SPACES, small(), BEHAVIOUR, seed=0).td_loss(x)[0].item() for x in (b, changed)]
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_an_update_trains_the_core_and_sends_one_priority_per_sequence(tmp_path: Path, kind: str) -> None:
    b = batch(tmp_path, [(0, 0, 0), (1, 1, 1), (0, 6, 1), (1, 4, 0)], kind=kind)
    learner = R2D2(SPACES, small(kind), BEHAVIOUR, seed=0)
    before = learner.nets.online.state_dict()["core.rnn.weight_hh_l0"].clone()
    info = learner.update(b)
    assert set(info) == {"td_loss", "q_mean", "grad_norm", "trained_rows"}
    assert all(np.isfinite(v) for v in info.values()) and info["trained_rows"] == b["trained"].sum()
    assert learner.td_abs is not None and learner.td_abs.shape == (4,) and (learner.td_abs >= 0).all()
    assert not torch.equal(before, learner.nets.online.state_dict()["core.rnn.weight_hh_l0"])


def test_the_target_network_follows_every_target_update_every_updates(tmp_path: Path) -> None:
    b = batch(tmp_path, [(0, 4, 0), (1, 4, 1), (0, 5, 1), (1, 6, 0)])
    learner = R2D2(SPACES, small(target_update_every=2), BEHAVIOUR, seed=0)
    learner.update(b)
    assert not params_equal(learner.nets.online, learner.nets.target)
    learner.update(b)
    assert params_equal(learner.nets.online, learner.nets.target)


def test_state_round_trips_and_resumes_the_same_stream(tmp_path: Path) -> None:
    b = batch(tmp_path, [(0, 4, 0), (1, 4, 1), (0, 5, 1), (1, 6, 0)])
    a = R2D2(SPACES, small(), BEHAVIOUR, seed=0)
    a.update(b)
    resumed = R2D2(SPACES, small(), BEHAVIOUR, seed=1)
    resumed.load(roundtrip(a.state()))
    a.update(b)
    resumed.update(b)
    assert params_equal(a.nets.online, resumed.nets.online) and params_equal(a.nets.target, resumed.nets.target)
