"""Running observation statistics: exact under any chunking, frozen into manifests, handed to every network."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlfleet.learner_worker.algorithms.ppo import PPO
from rlfleet.learner_worker.obsnorm import RunningStats
from rlfleet.shared.algorithms.ppo import PPOParams
from tests.support.policies import PENDULUM, SAMPLING


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=6), st.integers(0, 2**16))
def test_merged_statistics_equal_those_of_all_rows_at_once(sizes: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    parts = [rng.normal(3.0, 2.0, (n, 3)) for n in sizes]
    stats = RunningStats((3,), clip=5.0)
    for part in parts:
        stats.update(part)
    rows = np.concatenate(parts)
    assert stats.count == len(rows)
    np.testing.assert_allclose(stats.mean, rows.mean(axis=0), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(stats.var, rows.var(axis=0), rtol=1e-7, atol=1e-9)


def test_no_data_means_identity_statistics_and_state_round_trips() -> None:
    stats = RunningStats((2,), clip=10.0)
    assert stats.frozen().mean == (0.0, 0.0) and stats.frozen().var == (1.0, 1.0)
    stats.update(np.array([[1.0, 2.0], [3.0, 6.0]]))
    again = RunningStats((2,), clip=10.0)
    again.load(stats.state())
    assert again.frozen() == stats.frozen() == stats.frozen()
    assert stats.frozen().clip == 10.0


def test_every_network_of_a_learner_gets_the_statistics() -> None:
    ppo = PPO(PENDULUM, PPOParams(), SAMPLING.model_copy(update={"head": "gaussian"}), seed=0)
    stats = RunningStats((3,), clip=10.0)
    stats.update(np.array([[10.0, 0.0, -4.0], [12.0, 2.0, -2.0]]))
    stats.apply_to(ppo)
    for net in (ppo.actor, ppo.critic):
        np.testing.assert_allclose(net.norm_mean.numpy(), [11.0, 1.0, -3.0])
    obs = torch.tensor([[11.0, 1.0, -3.0]])
    with torch.no_grad():  # the mean maps to zero input: the same output as a zero observation without stats
        normalised = ppo.critic(obs)
        ppo.critic.set_obs_norm(None)
        assert torch.allclose(normalised, ppo.critic(torch.zeros(1, 3)), atol=1e-5)
