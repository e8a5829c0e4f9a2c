"""What every learner loop shares (learner_worker/trainer.py): here, when a due policy version is written."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import torch

from rlfleet.shared.wire import Ack
from rlfleet.shared.worker.lifecycle import EXIT_OK
from tests.support.configs import small_run_config
from tests.support.fake_coordinator import FakeCoordinator, reply
from tests.support.learner import Payloads, learn
from tests.support.policies import learner_task

torch.set_num_threads(1)
pytestmark = pytest.mark.timeout(120)
FROZEN_CALLS = 50  # sample calls during which no env step is acknowledged: collectors paused


def test_versions_no_collector_would_load_are_not_written(tmp_path: Path) -> None:
    """small_run_config: publish_every=20, checkpoint_every=50, 2 batches per sample call. While the coordinator
    acknowledges no env steps (collectors paused), due versions wait, but for a checkpoint's; once steps come in the
    pending one is written and later ones as due. Before, all of 20, 40, ..., 160 were written."""
    task = learner_task(small_run_config())
    fake = FakeCoordinator(task)
    payloads = Payloads(tmp_path)
    payloads.serve(fake)
    serve = fake.handlers["sample"]

    def sample(request: httpx.Request) -> httpx.Response:
        response = serve(request)
        if payloads.calls <= FROZEN_CALLS:
            fake.env_steps_total = 0
        return response

    def learn_info(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content)["iteration"] >= 160:
            fake.run_state = "solved"
        return reply(Ack(directive=fake.directive()))

    fake.handlers.update(sample=sample, **{"learn-info": learn_info})
    assert learn(fake, tmp_path) == EXIT_OK
    published = [json.loads(p.request.content)["iteration"] for p in fake.of("policies")]
    assert published[:2] == [20, 50]  # the first version; then the checkpoint's (its model is the published one)
    # The prefetcher runs at most 3 calls (6 updates) ahead: steps come in by update 2 * (FROZEN_CALLS + 3).
    assert not [i for i in published if 50 < i < 2 * FROZEN_CALLS - 6], published
    assert {120, 140, 160} <= set(published), published
