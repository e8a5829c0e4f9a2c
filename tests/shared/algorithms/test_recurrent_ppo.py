"""A recurrent core at config load: only a learner that trains one takes it, with collectors that can carry it."""

from __future__ import annotations

from typing import Any

import pytest

from rlfleet.shared.algorithms import REGISTRY
from rlfleet.shared.algorithms.base import DatasetParams
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.payloads.schema import ChunkSchema

BASE: dict[str, Any] = {
    "name": "t", "env": {"id": "CartPole-v1", "solve_threshold": 475},
    "collector": {"num_envs": 4, "chunk_steps": 32},
    "replay": {"sampler": "fifo", "capacity_transitions": 8192, "min_transitions": 1, "max_use": 1},
    "sampling": {"unit": "chunk", "min_batch_size": 128, "max_batch_size": 256, "force_sync": True}}
CORE = {"kind": "gru", "hidden": 16}


def config(**changes: Any) -> RunConfig:
    return RunConfig.model_validate({**BASE, **changes})


@pytest.mark.parametrize("name", sorted(n for n, spec in REGISTRY.items() if not spec.recurrent))
def test_every_algorithm_without_the_capability_refuses_a_core(name: str) -> None:
    required = {"dataset": "demo"} if issubclass(REGISTRY[name].params, DatasetParams) else {}
    able = r"use (\w+ or )*recurrent_ppo"  # every recurrent algorithm, by name
    with pytest.raises(ValueError, match=rf"{name} cannot train a recurrent core \(algo.net.core\): {able}"):
        config(algo={"name": name, "net": {"core": CORE}, **required})


@pytest.mark.parametrize("name", sorted(n for n, spec in REGISTRY.items() if spec.recurrent))
def test_every_recurrent_algorithm_needs_a_core(name: str) -> None:
    with pytest.raises(ValueError, match=f"{name} trains a recurrent core: set algo.net.core"):
        config(algo={"name": name, "net": {"hidden": [64]}})


def test_a_core_with_double_buffered_collectors_is_refused() -> None:
    with pytest.raises(ValueError, match="leave collector.double_buffer off"):
        config(algo={"name": "recurrent_ppo"},
               collector={"num_envs": 4, "chunk_steps": 32, "env_backend": "async", "double_buffer": True})


def test_a_learner_group_needs_minibatches_that_split_among_its_ranks() -> None:
    config(algo={"name": "recurrent_ppo", "minibatch_size": 256}, learner={"replicas": 2})
    with pytest.raises(ValueError, match=r"algo.minibatch_size \(255\) must be a multiple of learner.replicas \(2\)"):
        config(algo={"name": "recurrent_ppo", "minibatch_size": 255}, learner={"replicas": 2})


@pytest.mark.parametrize(("kind", "shape"), [("gru", (16,)), ("lstm", (2, 16))])
def test_the_plan_hands_the_core_to_collectors_and_its_state_to_the_chunk_schema(kind: str, shape: tuple) -> None:
    plan = RunPlan.of(config(algo={"name": "recurrent_ppo", "net": {"core": {"kind": kind, "hidden": 16}}}))
    assert plan.behaviour.core is not None and plan.behaviour.core.kind == kind
    schema: ChunkSchema = plan.schema
    assert schema.columns["core_state"].shape == shape
    assert "core_state" not in RunPlan.of(config(algo={"name": "ppo"})).schema.columns
