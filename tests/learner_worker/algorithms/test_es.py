"""The ES master's math: centred ranks, the gradient estimate, and ES finding a known optimum; a resumed master
draws and steps exactly as the uninterrupted one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rlfleet.collector_worker.members import MemberEvaluator
from rlfleet.learner_worker.algorithms.es import ES, centred_ranks, gradient_estimate
from rlfleet.shared.algorithms.base import sampled_head
from rlfleet.shared.algorithms.es import ESParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.config.run_config import EnvConfig
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.files import save_policy
from rlfleet.shared.policy.flat_params import unflatten
from rlfleet.shared.policy.manifest import Behaviour
from rlfleet.shared.policy.nets import PolicyNet
from rlfleet.shared.policy.noise_table import NoiseTable
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import MemberOutcome, MemberTask
from tests.support.learner_data import roundtrip
from tests.support.policies import CARTPOLE, PENDULUM

torch.set_num_threads(1)


def test_centred_ranks_spread_evenly_over_a_half_unit_either_side() -> None:
    ranks = centred_ranks(np.array([3.0, -10.0, 7.0, 0.0, 100.0]))
    np.testing.assert_allclose(ranks, [0.0, -0.5, 0.25, -0.25, 0.5])
    assert abs(ranks.sum()) < 1e-12
    # invariant to any increasing transform of the returns: only their order counts
    np.testing.assert_array_equal(centred_ranks(np.array([3.0, -10.0, 7.0, 0.0, 100.0]) ** 3), ranks)
    assert np.array_equal(centred_ranks(np.array([5.0])), [0.0])


def test_tied_returns_get_distinct_ranks_in_report_order() -> None:
    np.testing.assert_allclose(centred_ranks(np.array([1.0, 1.0, 1.0])), [-0.5, 0.0, 0.5])


def test_gradient_estimate_is_the_weighted_sum_of_signed_perturbations() -> None:
    table = NoiseTable(5, 4096)
    dim, sigma = 10, 0.05
    weights, indices, signs = np.array([0.5, -0.5, 0.1]), np.array([3, 3, 900]), np.array([1, -1, 1])
    expected = sum(w * s * table.noise[i:i + dim].astype(np.float64)
                   for w, i, s in zip(weights, indices, signs, strict=True)) / (3 * sigma)
    np.testing.assert_allclose(gradient_estimate(weights, indices, signs, table, dim, sigma), expected)


def _es(**params: object) -> ES:
    cfg = ESParams(net=NetConfig(hidden=(4,)), noise_table_size=8192, **params)  # type: ignore[arg-type]
    return ES(CARTPOLE, cfg, Behaviour(head=sampled_head(CARTPOLE), sample=False), seed=3)


def _generation(es: ES, objective: np.ndarray) -> list[MemberOutcome]:
    """Every member's 'return': minus the squared distance of its perturbed vector to `objective`."""
    theta = es.theta.detach().numpy().astype(np.float64)
    results = []
    for k, member in enumerate(es.members()):
        moved = theta + member.sign * es.cfg.sigma * es.table.get(member.noise_index, es.dim)
        results.append(MemberOutcome(member=k, noise_index=member.noise_index, sign=member.sign,
                                     mean_return=-float(np.sum((moved - objective) ** 2)), mean_length=1.0))
    return results


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_es_climbs_to_the_optimum_of_a_quadratic(optimizer: str) -> None:
    es = _es(population=32, sigma=0.05, learning_rate=0.05 if optimizer == "adam" else 0.001,
             optimizer=optimizer, weight_decay=0.0)
    objective = np.random.default_rng(0).uniform(-1, 1, es.dim)
    start = np.linalg.norm(es.theta.detach().numpy() - objective)
    for _ in range(300):
        losses = es.update(_generation(es, objective))
    end = np.linalg.norm(es.theta.detach().numpy() - objective)
    assert end < 0.1 * start, (start, end)
    assert losses["return_max"] <= 0 and losses["return_mean"] <= losses["return_max"]


def test_members_come_in_antithetic_pairs_of_distinct_offsets() -> None:
    members = _es(population=16).members()
    assert len(members) == 16
    assert [m.sign for m in members] == [1, -1] * 8
    assert all(members[i].noise_index == members[i + 1].noise_index for i in range(0, 16, 2))
    assert len({m.noise_index for m in members}) == 8


def test_a_resumed_master_draws_and_steps_like_the_uninterrupted_one() -> None:
    objective = np.ones(_es().dim)
    first = _es(population=8)
    for _ in range(3):
        first.update(_generation(first, objective))
    resumed = _es(population=8)
    resumed.load(roundtrip(first.state()))  # as a checkpoint persists it
    assert resumed.members() == first.members()
    generation = _generation(first, objective)
    first.update(generation)
    resumed.update(generation)
    assert torch.equal(first.theta, resumed.theta)
    assert all(torch.equal(a, b) for a, b in zip(first.policy_state().values(), resumed.policy_state().values(),
                                                 strict=True))


def test_a_generation_with_fewer_than_two_results_is_refused() -> None:
    es = _es()
    with pytest.raises(ValueError, match="nothing to rank"):
        es.update(_generation(es, np.zeros(es.dim))[:1])


def test_one_sgd_step_moves_the_vector_by_the_learning_rate_times_the_estimate() -> None:
    """The optimizer ascends the estimate (ES maximises returns) by exactly lr * g without momentum or decay."""
    es = _es(population=8, optimizer="sgd", momentum=0.0, weight_decay=0.0, learning_rate=0.1)
    before = es.theta.detach().numpy().astype(np.float64)
    results = _generation(es, np.ones(es.dim))
    g = gradient_estimate(centred_ranks(np.array([r.mean_return for r in results])),
                          np.array([r.noise_index for r in results]), np.array([r.sign for r in results]),
                          es.table, es.dim, es.cfg.sigma)
    info = es.update(results)
    np.testing.assert_allclose(es.theta.detach().numpy() - before, 0.1 * g, atol=1e-6)
    assert info["grad_norm"] == pytest.approx(float(np.linalg.norm(g)))


@pytest.mark.parametrize("spaces", [CARTPOLE, PENDULUM])
def test_a_collector_perturbs_the_published_policy_as_the_master_does(spaces: Spaces, tmp_path: Path) -> None:
    """The master's vector and a collector's, rebuilt from the published file, mean the same weights (a
    gaussian head's log_std included)."""
    cfg = ESParams(population=4, sigma=0.3, noise_table_size=4096)
    es = ES(spaces, cfg, Behaviour(head=sampled_head(spaces), sample=False), seed=2)
    with torch.no_grad():  # every tensor away from its initialisation, log_std's zeros included
        es.theta.add_(torch.linspace(-1, 1, es.dim))
    store = LocalStore(tmp_path)
    ref = save_policy(store, 1, es.policy_state(), es.manifest())
    spec = es.members()[1]  # the negative half of the first antithetic pair
    task = MemberTask(generation=1, member=1, policy=ref, perturbation=es.perturbation(),
                      noise_index=spec.noise_index, sign=spec.sign, seed=0)
    collector_actor = MemberEvaluator(EnvConfig(), store).actor(task)
    moved = es.theta.detach().numpy() + spec.sign * cfg.sigma * es.table.get(spec.noise_index, es.dim)
    net = PolicyNet(es.manifest())
    net.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in unflatten(moved, es.shapes).items()})
    obs = np.random.default_rng(0).standard_normal((16, *spaces.obs.shape)).astype(np.float32)
    with torch.no_grad():
        np.testing.assert_allclose(collector_actor.forward(obs), net(torch.from_numpy(obs)).numpy(), atol=1e-5)
    if "log_std" in es.shapes:
        np.testing.assert_allclose(collector_actor.log_std, net.log_std.detach().numpy(), atol=1e-6)
