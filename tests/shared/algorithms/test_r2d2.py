"""r2d2 at config load: a core it requires, epsilon-greedy collectors that carry it, chunks that store its state."""

from __future__ import annotations

from typing import Any

import pytest

from rlfleet.shared.algorithms.r2d2 import R2D2Params
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import RunConfig

BASE: dict[str, Any] = {
    "name": "t", "env": {"id": "CartPole-v1", "solve_threshold": 475},
    "collector": {"num_envs": 4, "chunk_steps": 32, "epsilon": {"start": 1.0, "end": 0.05, "decay_env_steps": 500}},
    "replay": {"sampler": "prioritized"}, "sampling": {"unit": "sequence", "sequence_length": 8},
    "algo": {"name": "r2d2", "net": {"hidden": [16], "core": {"kind": "lstm", "hidden": 16}}}}


def config(**changes: Any) -> RunConfig:
    return RunConfig.model_validate({**BASE, **changes})


def test_collectors_act_epsilon_greedily_with_the_core_and_chunks_store_its_state() -> None:
    plan = RunPlan.of(config())
    behaviour = plan.behaviour
    assert behaviour.head == "q_values" and not behaviour.sample
    assert behaviour.epsilon is not None and behaviour.epsilon.end == 0.05
    assert behaviour.core is not None and behaviour.core.kind == "lstm"
    assert plan.schema.columns["core_state"].shape == (2, 16)
    assert "logp" not in plan.schema.columns


def test_the_paper_defaults_a_core_and_h() -> None:
    algo = config(algo={"name": "r2d2"}).algo
    assert isinstance(algo, R2D2Params)
    assert algo.net.core is not None and algo.value.transform == "pohlen"
    assert algo.priority_eta == 0.9 and algo.n_step == 5


def test_a_learner_group_takes_equal_shares_of_the_batch() -> None:
    assert config(learner={"replicas": 2}, algo={"name": "r2d2", "batch_size": 32}).learner.replicas == 2
    with pytest.raises(ValueError, match=r"algo.batch_size \(33\) must be a multiple of learner.replicas \(2\)"):
        config(learner={"replicas": 2}, algo={"name": "r2d2", "batch_size": 33})
