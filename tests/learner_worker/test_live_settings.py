"""Live settings reach the learner (learner_worker/trainer.py): when the directive counts a new change, it re-reads
its task and trains on with the algorithm's new hyperparameters, its optimizer's learning rate included."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import torch

from rlfleet.learner_worker.checkpoint import load_latest_checkpoint
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import Ack
from rlfleet.shared.worker.lifecycle import EXIT_OK
from tests.support.fake_coordinator import FakeCoordinator, reply
from tests.support.learner import Payloads, learn, ppo_config
from tests.support.policies import learner_task

torch.set_num_threads(1)
pytestmark = pytest.mark.timeout(120)


def _with(config: RunConfig, **algo: float) -> RunConfig:
    doc = config.model_dump(mode="json")
    doc["algo"].update(algo)
    return RunConfig.model_validate(doc)


def test_a_live_change_of_the_learning_rate_reaches_the_optimizer(tmp_path: Path) -> None:
    config = _with(ppo_config(), learning_rate=1e-3, clip_range=0.2)
    changed = _with(config, learning_rate=2.5e-4, clip_range=0.3)
    fake = FakeCoordinator(learner_task(config))
    Payloads(tmp_path, logp=True).serve(fake)
    claims_before_change: list[int] = []

    def learn_info(request: httpx.Request) -> httpx.Response:
        iteration = json.loads(request.content)["iteration"]
        if iteration == 3:  # an operator changes settings: the coordinator's task now carries them
            claims_before_change.append(len(fake.of("claim")))
            fake.task = learner_task(changed)
            fake.progress = {"settings": 1}
        if iteration >= 8:
            fake.run_state = "solved"
        return reply(Ack(directive=fake.directive()))

    fake.handlers["learn-info"] = learn_info
    assert learn(fake, tmp_path) == EXIT_OK
    assert len(fake.of("claim")) > claims_before_change[0]  # the task was read again
    latest = load_latest_checkpoint(LocalStore(RunLayout(tmp_path, "test-run").checkpoints))
    assert latest is not None
    assert [group["lr"] for group in latest.algo["optimizer"]["param_groups"]] == [2.5e-4]
