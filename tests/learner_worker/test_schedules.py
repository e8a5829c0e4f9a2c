"""The learner's side of schedules: scheduled values reach what the learner reads at its next update (its cfg, every
optimizer it holds), always from the run's configured start."""

from __future__ import annotations

import pytest
import torch

from rlfleet.learner_worker.algorithms.dqn import DQN
from rlfleet.learner_worker.algorithms.ppo import PPO
from rlfleet.learner_worker.algorithms.sac import SAC
from rlfleet.learner_worker.schedules import Schedules
from rlfleet.shared.algorithms.dqn import DQNParams
from rlfleet.shared.algorithms.ppo import PPOParams
from rlfleet.shared.algorithms.sac import SACParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.policy.manifest import Behaviour
from tests.support.learner_data import N_ACTIONS, OBS_DIM, make_chunk
from tests.support.policies import EPSILON_GREEDY, PENDULUM, SAMPLING, flat_spaces

torch.set_num_threads(1)
NET = NetConfig(hidden=(8,))
TANH = Behaviour(head="tanh_gaussian", sample=True)


def test_scheduled_values_reach_the_learner_s_cfg_and_optimizer_and_change_its_update() -> None:
    cfg = PPOParams(net=NET, learning_rate=1e-2, clip_range=0.3, epochs=1, schedules={
        "learning_rate": {"kind": "linear", "end": 0.0, "over": 1000},
        "clip_range": {"kind": "piecewise", "points": [[4, 0.1]], "unit": "updates"}})
    ppo = PPO(flat_spaces(OBS_DIM, N_ACTIONS), cfg, SAMPLING, seed=0)
    schedules = Schedules(cfg, None)
    assert schedules.apply(ppo, env_steps=250, updates=2) == pytest.approx({"learning_rate": 7.5e-3,
                                                                            "clip_range": 0.2})
    assert ppo.cfg.clip_range == pytest.approx(0.2) and ppo.cfg.learning_rate == pytest.approx(7.5e-3)
    assert ppo.optimizer.optimizer.param_groups[0]["lr"] == pytest.approx(7.5e-3)
    assert ppo.cfg.gamma == cfg.gamma  # everything else as configured
    schedules.apply(ppo, env_steps=1000, updates=9)  # learning rate 0: the update moves nothing
    before = [p.clone() for p in ppo.actor.parameters()]
    ppo.update([make_chunk(1)])
    assert all(torch.equal(a, b) for a, b in zip(before, ppo.actor.parameters(), strict=True))
    schedules.apply(ppo, env_steps=0, updates=0)  # from the configured start, never from the current values
    assert ppo.cfg.clip_range == pytest.approx(0.3) and ppo.optimizer.optimizer.param_groups[0]["lr"] == 1e-2


def test_every_optimizer_of_a_learner_takes_a_scheduled_learning_rate() -> None:
    cfg = SACParams(net=NET, schedules={"learning_rate": {"kind": "cosine", "end": 0.0, "over": 100}})
    sac = SAC(PENDULUM, cfg, TANH, seed=0)
    Schedules(cfg, None).apply(sac, env_steps=50, updates=0)
    for optimizer in (sac.actor_optimizer, sac.critic_optimizer, sac.alpha_optimizer):
        assert optimizer.optimizer.param_groups[0]["lr"] == pytest.approx(cfg.learning_rate / 2)


def test_without_schedules_nothing_is_touched_or_reported() -> None:
    ppo = PPO(flat_spaces(OBS_DIM, N_ACTIONS), PPOParams(net=NET), SAMPLING, seed=0)
    cfg = ppo.cfg
    assert Schedules(cfg, None).apply(ppo, env_steps=10**6, updates=10**4) == {}
    assert ppo.cfg is cfg


def test_a_q_learner_takes_a_scheduled_learning_rate_through_its_networks_part() -> None:
    """DQN's optimizer lives in its QNetworks part, not on the learner: the schedule still reaches it."""
    cfg = DQNParams(net=NET, schedules={"learning_rate": {"kind": "linear", "end": 0.0, "over": 100}})
    dqn = DQN(flat_spaces(4, 2), cfg, EPSILON_GREEDY, seed=0)
    Schedules(cfg, None).apply(dqn, env_steps=25, updates=0)
    assert dqn.nets.optimizer.optimizer.param_groups[0]["lr"] == pytest.approx(cfg.learning_rate * 0.75)
