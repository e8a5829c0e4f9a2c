"""learner_worker/algorithms/es.py: centred ranks, the gradient estimate, and the ES master driven through its
members()/update() protocol on a known objective, with resume from its checkpoint state."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch

from collector_worker.members import MemberEvaluator
from learner_worker.algorithms.es import ES, centred_ranks, gradient_estimate
from shared.algorithms.base import sampled_head
from shared.algorithms.es import ESParams
from shared.config import EnvConfig
from shared.flat_params import unflatten
from shared.manifest import Behaviour
from shared.nets import PolicyNet
from shared.noise_table import NoiseTable
from shared.policy_io import save_policy
from shared.store import LocalStore
from shared.wire_generations import MemberOutcome, MemberTask
from tests.policies import CARTPOLE, PENDULUM

torch.set_num_threads(1)
GREEDY = Behaviour(head="categorical", sample=False)


def test_centred_ranks_span_minus_half_to_half_keep_order_and_sum_to_zero() -> None:
    returns = np.random.default_rng(0).standard_normal(17) * 100
    ranks = centred_ranks(returns)
    assert ranks.min() == -0.5 and ranks.max() == 0.5
    assert ranks[returns.argmax()] == 0.5 and ranks[returns.argmin()] == -0.5
    assert ranks.sum() == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_array_equal(np.argsort(ranks), np.argsort(returns))
    np.testing.assert_array_equal(centred_ranks(returns * 1e6 + 3), ranks)  # invariant to the returns' scale


def test_centred_ranks_ties_are_stable_and_small_inputs_are_zero() -> None:
    np.testing.assert_allclose(centred_ranks(np.array([1.0, 1.0, 0.0, 1.0])), [-1 / 6, 1 / 6, -0.5, 0.5])
    np.testing.assert_array_equal(centred_ranks(np.array([2.0, 1.0])), [0.5, -0.5])
    np.testing.assert_array_equal(centred_ranks(np.array([5.0])), [0.0])
    assert len(centred_ranks(np.array([]))) == 0


def test_gradient_estimate_equals_the_direct_sum() -> None:
    table, dim, sigma = NoiseTable(4, 4096), 50, 0.2
    rng = np.random.default_rng(1)
    indices = rng.integers(0, table.offsets(dim), 8)
    signs = np.array([1, -1] * 4)
    weights = rng.uniform(-0.5, 0.5, 8)
    eps = np.stack([table.noise[i:i + dim].astype(np.float64) for i in indices])
    direct = (weights * signs) @ eps / (8 * sigma)
    np.testing.assert_allclose(gradient_estimate(weights, indices, signs, table, dim, sigma), direct, rtol=1e-12)


def make_es(seed: int = 0, **params: object) -> ES:
    cfg = ESParams(**{"population": 64, "sigma": 0.05, "learning_rate": 0.05, "weight_decay": 0.0,
                      "noise_table_size": 2**16, "net": {"hidden": (4,)}, **params})
    return ES(CARTPOLE, cfg, GREEDY, seed=seed)


def theta(es: ES) -> np.ndarray:
    return es.theta.detach().numpy().astype(np.float64)


def evaluate(es: ES, objective) -> list[MemberOutcome]:
    """Every member's outcome as a collector would report it: the objective at theta + sign * sigma * eps."""
    base, sigma = theta(es), es.cfg.sigma
    return [MemberOutcome(member=k, noise_index=m.noise_index, sign=m.sign, mean_length=1.0,
                          mean_return=float(objective(base + m.sign * sigma * es.table.get(m.noise_index, es.dim))))
            for k, m in enumerate(es.members())]


def test_members_are_antithetic_pairs_of_distinct_offsets() -> None:
    es = make_es()
    members = es.members()
    assert len(members) == 64
    assert [m.sign for m in members] == [1, -1] * 32
    assert all(a.noise_index == b.noise_index for a, b in zip(members[::2], members[1::2], strict=True))
    assert len({m.noise_index for m in members}) == 32
    assert members == es.members()  # drawn from (seed, updates): asking again gives the same generation
    assert make_es(seed=1).members() != members


def test_es_climbs_a_quadratic_to_its_optimum() -> None:
    es = make_es()
    target = np.random.default_rng(1).standard_normal(es.dim)

    def objective(x: np.ndarray) -> float:
        return -float(np.sum((x - target) ** 2))

    start = np.linalg.norm(theta(es) - target)
    for _ in range(150):
        info = es.update(evaluate(es, objective))
    end = np.linalg.norm(theta(es) - target)
    assert end < start / 20, (start, end)
    assert es.updates == 150 and info["return_max"] >= info["return_mean"] >= info["return_min"]


def test_one_sgd_step_moves_theta_by_the_learning_rate_times_the_estimate() -> None:
    es = make_es(optimizer="sgd", momentum=0.0, learning_rate=0.1)
    before = theta(es)
    results = evaluate(es, lambda x: float(x.sum()))
    expected = gradient_estimate(centred_ranks(np.array([r.mean_return for r in results])),
                                 np.array([r.noise_index for r in results]), np.array([r.sign for r in results]),
                                 es.table, es.dim, es.cfg.sigma)
    info = es.update(results)
    np.testing.assert_allclose(theta(es) - before, 0.1 * expected, atol=1e-6)
    assert (expected.sum()) > 0  # ascent: the sum of the parameters grows
    assert info["grad_norm"] == pytest.approx(float(np.linalg.norm(expected)))


def test_policy_state_is_the_unflattened_vector() -> None:
    es = make_es()
    state = es.policy_state()
    assert list(state) == list(es.shapes)
    np.testing.assert_array_equal(torch.cat([t.reshape(-1) for t in state.values()]).numpy(), es.theta.detach().numpy())


def test_resume_from_state_draws_the_same_members_and_takes_the_same_step() -> None:
    def objective(x: np.ndarray) -> float:
        return -float(np.sum((x - 1.0) ** 2))

    es = make_es(seed=3)
    for _ in range(3):
        es.update(evaluate(es, objective))
    saved = io.BytesIO()
    torch.save(es.state(), saved)  # the way a checkpoint stores it
    saved.seek(0)
    resumed = make_es(seed=3)
    resumed.load(torch.load(saved, weights_only=True))
    assert resumed.updates == 3
    assert resumed.members() == es.members()
    results = evaluate(es, objective)
    assert evaluate(resumed, objective) == results
    es.update(results)
    resumed.update(results)
    np.testing.assert_array_equal(theta(resumed), theta(es))
    assert resumed.members() == es.members()
    fresh = make_es(seed=3)  # without the state: a different generation and a different vector
    assert fresh.members() != es.members()


def test_update_with_fewer_than_two_results_refused() -> None:
    es = make_es()
    results = evaluate(es, lambda x: 0.0)
    with pytest.raises(ValueError, match="1 result"):
        es.update(results[:1])
    with pytest.raises(ValueError, match="0 result"):
        es.update([])
    assert es.updates == 0


@pytest.mark.parametrize("spaces", [CARTPOLE, PENDULUM])
def test_a_collector_perturbs_the_published_policy_as_the_master_does(spaces, tmp_path: Path) -> None:
    """The master's vector and a collector's, rebuilt from the published file, mean the same weights."""
    cfg = ESParams(population=4, sigma=0.3, noise_table_size=4096)
    es = ES(spaces, cfg, Behaviour(head=sampled_head(spaces), sample=False), seed=2)
    with torch.no_grad():  # every tensor distinct from its initialisation, log_std included
        es.theta.add_(torch.linspace(-1, 1, es.dim))
    store = LocalStore(tmp_path)
    ref = save_policy(store, 1, es.policy_state(), es.manifest())
    spec = es.members()[1]
    p = es.perturbation()
    task = MemberTask(generation=1, member=1, policy=ref, perturbation=p, noise_index=spec.noise_index,
                      sign=spec.sign, seed=0)
    collector_actor = MemberEvaluator(EnvConfig(), store).actor(task)
    moved = theta(es).astype(np.float32) + spec.sign * cfg.sigma * es.table.get(spec.noise_index, es.dim)
    net = PolicyNet(es.manifest())
    net.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in unflatten(moved, es.shapes).items()})
    obs = np.random.default_rng(0).standard_normal((16, *spaces.obs.shape)).astype(np.float32)
    with torch.no_grad():
        np.testing.assert_allclose(collector_actor.forward(obs), net(torch.from_numpy(obs)).numpy(), atol=1e-5)
    if "log_std" in es.shapes:
        np.testing.assert_allclose(collector_actor.log_std, net.log_std.detach().numpy(), atol=1e-6)
