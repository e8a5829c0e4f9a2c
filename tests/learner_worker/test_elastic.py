"""The learner group's launch: torchrun's arguments from the run config, and each rank's fixed registration."""

from __future__ import annotations

import pytest

from learner_worker.elastic import agent_args, rank_registration
from shared.config import RunConfig
from shared.ids import ID_PATTERN


def test_the_agent_runs_one_rank_per_node_at_the_configured_rendezvous() -> None:
    config = RunConfig.model_validate({"name": "cartpole-dqn__s0", "learner": {
        "replicas": 3, "rendezvous": "rlfleet-learner-0.rlfleet-learner:29500", "group_restarts": 4},
        "algo": {"name": "dqn", "batch_size": 96}})
    assert agent_args(config) == [
        "--nnodes=3", "--nproc-per-node=1", "--rdzv-backend=c10d",
        "--rdzv-endpoint=rlfleet-learner-0.rlfleet-learner:29500", "--rdzv-id=cartpole-dqn__s0", "--max-restarts=4",
        "--module", "launcher", "learner"]


def test_a_rank_registers_under_its_run_and_rank_and_a_single_learner_afresh(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert rank_registration() is None
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "cartpole-dqn__s0__20261124-164704")
    monkeypatch.setenv("RANK", "1")
    registration = rank_registration()
    assert registration == "cartpole-dqn__s0__20261124-164704.rank-1"
    assert re.fullmatch(ID_PATTERN.strip("^$"), registration)  # a valid request id on the wire
