"""A checkpoint loaded from another run (learner_worker/trainer.py): the learner continues from exactly its weights
and optimizer state (the first version it publishes after the load is the source's policy), keeps its own
counters, and refuses, whole, one whose tensors do not fit."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

from rlfleet.learner_worker.algorithms import load_learner
from rlfleet.learner_worker.checkpoint import Checkpoint, decode_checkpoint, load_latest_checkpoint, save_checkpoint
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.policy.files import decode_policy
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import Ack, CheckpointLoadRef
from rlfleet.shared.worker.lifecycle import EXIT_OK
from tests.support.configs import small_run_config
from tests.support.fake_coordinator import FakeCoordinator, reply
from tests.support.learner import Payloads, learn
from tests.support.policies import learner_task

torch.set_num_threads(1)
pytestmark = pytest.mark.timeout(120)
LOAD = CheckpointLoadRef(load_id="load-1", path="loads/load-1.pt")


def _config(hidden: list[int]) -> RunConfig:
    doc = small_run_config().model_dump(mode="json")
    doc["algo"]["net"]["hidden"] = hidden
    return RunConfig.model_validate(doc)


def _stage_source(data_dir: Path, config: RunConfig, seed: int) -> dict[str, torch.Tensor]:
    """Another run's learner (its own seed: other weights) checkpointed into this run's `loads/`, as the coordinator
    stages it; the source's policy weights."""
    source = load_learner(learner_task(config, seed=seed), torch.device("cpu"))
    scratch = LocalStore(data_dir / "source")
    name = save_checkpoint(scratch, Checkpoint(300, 9, 9600, source.state(), env_steps=20_000),
                           algorithm=config.algo.name, manifest=source.manifest().model_dump(mode="json"))
    LocalStore(RunLayout(data_dir, "test-run").checkpoints).put(LOAD.path, scratch.get(name))
    return source.policy_state()


def _train(data_dir: Path, config: RunConfig) -> FakeCoordinator:
    """The learner of `config` told of LOAD from its start, until its report at iteration 20."""
    fake = FakeCoordinator(learner_task(config))
    fake.progress = {"checkpoint_load": LOAD}
    Payloads(data_dir).serve(fake)

    def learn_info(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content)["iteration"] >= 20:
            fake.run_state = "solved"
        return reply(Ack(directive=fake.directive()))

    fake.handlers["learn-info"] = learn_info
    assert learn(fake, data_dir) == EXIT_OK
    return fake


def _published(data_dir: Path, fake: FakeCoordinator) -> list[tuple[int, dict[str, np.ndarray]]]:
    store = LocalStore(RunLayout(data_dir, "test-run").store_root)
    out = []
    for seen in fake.of("policies"):
        body = json.loads(seen.request.content)
        out.append((body["iteration"], decode_policy(store.get(body["policy"]["path"]))[1]))
    return out


def test_the_learner_continues_from_the_loaded_weights(tmp_path: Path) -> None:
    config = _config([32, 32])
    source = _stage_source(tmp_path, config, seed=7)
    fake = _train(tmp_path, config)
    published = _published(tmp_path, fake)
    iteration, weights = published[0]
    assert iteration == 0  # published at once, before any update: collectors act with the loaded policy
    assert set(weights) == set(source)
    for key, value in source.items():
        np.testing.assert_array_equal(weights[key], value.numpy())
    later = published[-1][1]
    assert any(not np.array_equal(later[k], source[k].numpy()) for k in source)  # and trained on from there
    checkpoints = LocalStore(RunLayout(tmp_path, "test-run").checkpoints)
    first = decode_checkpoint(checkpoints.get("learner-0000000000.pt"))
    assert first.loaded == "load-1" and first.iteration == 0  # this run's counters, the load remembered
    latest = load_latest_checkpoint(checkpoints)
    assert latest is not None and latest.loaded == "load-1" and latest.iteration >= 20


def test_a_checkpoint_whose_tensors_do_not_fit_is_not_taken(tmp_path: Path) -> None:
    source = _stage_source(tmp_path, _config([16]), seed=7)  # another network: the coordinator would refuse it too
    fake = _train(tmp_path, _config([32, 32]))
    published = _published(tmp_path, fake)
    assert published and published[0][0] > 0  # no version was published for a load
    assert all(weights[k].shape != tuple(v.shape) for _, weights in published for k, v in source.items()
               if k in weights)
    latest = load_latest_checkpoint(LocalStore(RunLayout(tmp_path, "test-run").checkpoints))
    assert latest is not None and latest.loaded == "load-1"  # asked once: not retried at every update


def test_an_unreadable_staged_checkpoint_is_refused_and_training_goes_on(tmp_path: Path) -> None:
    LocalStore(RunLayout(tmp_path, "test-run").checkpoints).put(LOAD.path, b"not a checkpoint")
    fake = _train(tmp_path, _config([32, 32]))  # exits 0: no crash, so no restart loop on the same file
    assert _published(tmp_path, fake)[0][0] > 0
