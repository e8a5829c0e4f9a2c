"""Behavioural cloning: it learns a recorded rule (categorical), a recorded mean (gaussian), reports held-out
agreement, and resumes from its state."""

from __future__ import annotations

import numpy as np
import torch

from rlfleet.learner_worker.algorithms.bc import BC
from rlfleet.shared.algorithms.base import sampled_head
from rlfleet.shared.algorithms.bc import BCParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour
from tests.support.learner_data import roundtrip
from tests.support.policies import CARTPOLE, PENDULUM

torch.set_num_threads(1)


def _bc(spaces: Spaces, seed: int = 0) -> BC:
    cfg = BCParams(dataset="demo", net=NetConfig(hidden=(32,), activation="tanh"), learning_rate=3e-3)
    return BC(spaces, cfg, Behaviour(head=sampled_head(spaces), sample=False), seed)


def _rule(n: int, seed: int) -> dict[str, np.ndarray]:
    """CartPole-shaped observations labelled by the balancing rule sign(angle + 0.5 * angular velocity)."""
    obs = np.random.default_rng(seed).standard_normal((n, 4)).astype(np.float32)
    return {"obs": obs, "actions": (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)}


def test_bc_imitates_a_discrete_rule_and_scores_held_out_transitions() -> None:
    bc = _bc(CARTPOLE)
    valid = _rule(1000, seed=99)
    before = bc.evaluate(valid)
    assert set(before) == {"valid_nll", "valid_accuracy"} and before["valid_nll"] > 0.5
    for step in range(300):
        losses = bc.update(_rule(128, seed=step))
    after = bc.evaluate(valid)
    assert after["valid_accuracy"] > 0.95 and after["valid_nll"] < 0.3 < before["valid_nll"]
    assert set(losses) == {"nll", "accuracy"}


def test_bc_fits_a_gaussian_mean_for_box_actions() -> None:
    bc = _bc(PENDULUM)
    rng = np.random.default_rng(0)

    def batch(n: int) -> dict[str, np.ndarray]:
        obs = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
        return {"obs": obs, "actions": (obs[:, :1] - obs[:, 1:2]).astype(np.float32)}

    valid = batch(500)
    start = bc.evaluate(valid)["valid_action_mse"]
    for _ in range(400):
        bc.update(batch(128))
    scores = bc.evaluate(valid)
    assert scores["valid_action_mse"] < 0.05 < start
    assert float(bc.net.log_std.detach().mean()) < -0.5  # the learned spread shrinks as the mean fits


def test_a_resumed_learner_steps_exactly_like_the_uninterrupted_one() -> None:
    first = _bc(CARTPOLE)
    for step in range(5):
        first.update(_rule(64, seed=step))
    resumed = _bc(CARTPOLE, seed=7)
    resumed.load(roundtrip(first.state()))
    batch = _rule(64, seed=100)
    assert first.update(batch) == resumed.update(batch)
    assert all(torch.equal(a, b) for a, b in zip(first.policy_state().values(), resumed.policy_state().values(),
                                                 strict=True))
    assert first.manifest().head == "categorical"
