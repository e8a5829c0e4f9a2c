"""The whole learner in-process (real trainer, store and prefetcher; fake coordinator): how it ends and what it
reports when training diverges, its prefetch thread crashes, or a payload is unusable."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

from learner_worker import main as learner_main
from learner_worker.cache import ChunkCache
from learner_worker.loops import MAX_CHUNKS_PER_TAKE, ChunkTrainer
from learner_worker.trainer import TrainingDiverged, check_finite
from shared.config.run_config import RunConfig
from shared.payloads.codec import encode_chunk
from shared.storage.layout import RunLayout, chunk_path
from shared.storage.local import LocalStore
from shared.wire import SampledChunk, SampleRequest, SampleResponse
from shared.worker.lifecycle import EXIT_CRASHED, EXIT_OK, run_session
from tests.conftest import small_run_config
from tests.policies import learner_task
from tests.shared.fake_coordinator import FakeCoordinator, make_session, reply

torch.set_num_threads(1)
pytestmark = pytest.mark.timeout(120)
T, N, OBS = 8, 2, 4  # CartPole observations


def prioritized() -> RunConfig:
    doc = small_run_config().model_dump(mode="json")
    doc["replay"]["sampler"] = "prioritized"
    return RunConfig.model_validate(doc)


def ppo_config() -> RunConfig:
    doc = small_run_config().model_dump(mode="json")
    doc.update(algo="ppo", sampling={"unit": "chunk", "force_sync": True})
    doc["replay"].update(sampler="fifo", max_use=1)
    doc["ppo"] = {"net": {"hidden": [8, 8], "activation": "tanh"}, "epochs": 1, "minibatch_size": 8,
                  "report_every": 1}  # the fake coordinator ends the run on a report
    return RunConfig.model_validate(doc)


class Payloads:
    """Chunks of CartPole-shaped transitions in the run's store, served by the fake's sample route."""

    def __init__(self, data_dir: Path, count: int = 3, rewards: float = 1.0, logp: bool = False) -> None:
        self.store = LocalStore(RunLayout(data_dir, "test-run").store_root)
        rng = np.random.default_rng(0)
        self.refs = []
        for k in range(count):
            shape = (T, N)
            arrays = {"obs": rng.normal(size=(*shape, OBS)).astype(np.float32),
                      "next_obs": rng.normal(size=(*shape, OBS)).astype(np.float32),
                      "actions": rng.integers(0, 2, shape).astype(np.int64),
                      "rewards": np.full(shape, rewards, np.float32),
                      "terminated": rng.random(shape) < 0.1, "truncated": np.zeros(shape, bool),
                      "valid": np.ones(shape, bool)}
            if logp:  # the sampling collectors' column
                arrays["logp"] = np.full(shape, math.log(0.5), np.float32)
            path = chunk_path("collect-0", f"chunk{k}")
            self.refs.append(SampledChunk(chunk_id=f"chunk{k}", payload_path=path,
                                          sha256=self.store.put(path, encode_chunk(arrays)), policy_version=0,
                                          num_envs=N))
        self.calls = 0

    def serve(self, fake: FakeCoordinator, solve_after: int = 10**9) -> None:
        def sample(request: httpx.Request) -> httpx.Response:
            self.calls += 1
            if self.calls > solve_after:
                fake.run_state = "solved"
            ask = SampleRequest.model_validate_json(request.content)
            if ask.batch_size == MAX_CHUNKS_PER_TAKE:  # the chunk loop: whole chunks
                items = len(self.refs)
                index, offsets, lengths = list(range(items)), [0] * items, [T * N] * items
                unit, size = "chunk", items
            else:
                items = ask.batch_size * ask.num_batches
                index, offsets, lengths = [k % len(self.refs) for k in range(items)], [k % (T * N) for k in
                                                                                     range(items)], [1] * items
                unit, size = "transition", ask.batch_size
            return reply(SampleResponse(unit=unit, chunks=self.refs, chunk_index=index, offsets=offsets,
                                        lengths=lengths, ids=list(range(items)), weights=[1.0] * items,
                                        batch_size=size, buffer_transitions=len(self.refs) * T * N,
                                        directive=fake.directive()))
        fake.handlers["sample"] = sample


def learn(fake: FakeCoordinator, data_dir: Path) -> int:
    return run_session(make_session(fake, "learner"), data_dir, learner_main._claim_and_train)


def test_nan_td_errors_end_the_learner_naming_the_iteration(tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    payloads = Payloads(tmp_path, rewards=float("nan"))
    fake = FakeCoordinator(learner_task(prioritized()))
    payloads.serve(fake)
    with caplog.at_level(logging.INFO):
        assert learn(fake, tmp_path) == EXIT_CRASHED
    last = caplog.records[-1].getMessage()
    assert last.startswith("learner exits with status 4: main thread: TrainingDiverged: training diverged at "
                           "iteration 1: non-finite td_loss=nan"), last
    assert fake.of("priorities") == []  # NaN never sent as priorities
    assert not RunLayout(tmp_path, "test-run").checkpoints.exists() or not any(
        RunLayout(tmp_path, "test-run").checkpoints.iterdir())  # the broken model is not checkpointed


def test_a_prefetch_crash_ends_the_learner_instead_of_hanging_it(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: ChunkCache, sample: SampleResponse) -> list:
        raise RuntimeError("bug in the cache")

    monkeypatch.setattr(ChunkCache, "batches", broken)
    payloads = Payloads(tmp_path)
    fake = FakeCoordinator(learner_task(small_run_config()))
    payloads.serve(fake)
    assert learn(fake, tmp_path) == EXIT_CRASHED


def test_a_corrupt_payload_is_reported_and_training_goes_on(tmp_path: Path) -> None:
    payloads = Payloads(tmp_path)
    path = payloads.store.root / payloads.refs[2].payload_path
    path.write_bytes(path.read_bytes()[:-1])  # truncated: sha256 mismatch
    fake = FakeCoordinator(learner_task(small_run_config()))
    payloads.serve(fake, solve_after=20)
    assert learn(fake, tmp_path) == EXIT_OK  # the run ended: an expected ending
    reports = fake.of("corrupt")
    assert reports and {r.body["chunk_id"] for r in reports} == {"chunk2"}
    assert "IntegrityError" in reports[0].body["reason"]
    assert fake.of("learn-info"), "it kept training on the good chunks"


def test_chunk_take_reuses_its_request_id_and_reports_corrupt_chunks(tmp_path: Path) -> None:
    payloads = Payloads(tmp_path, logp=True)
    payloads.store.put(payloads.refs[0].payload_path, b"\x93not msgpack either")
    fake = FakeCoordinator(fail_once={"sample"})
    payloads.serve(fake)
    session = make_session(fake, "learner")
    session.register()
    trainer = ChunkTrainer(session, RunLayout(tmp_path, "test-run"), learner_task(ppo_config()))
    chunks = trainer.take()
    trainer.take()
    session.close()
    assert len(chunks) == 2  # chunk0 skipped
    attempts = fake.of("sample")
    ids = [a.body["request_id"] for a in attempts]
    assert [a.status for a in attempts] == [503, 200, 200] and ids[0] == ids[1] != ids[2]
    assert [r.body["chunk_id"] for r in fake.of("corrupt")] == ["chunk0", "chunk0"]


@pytest.mark.parametrize(("losses", "td", "named"), [
    ({"policy_loss": float("nan"), "value_loss": 1.0}, None, "policy_loss=nan"),
    ({"grad_norm": float("inf")}, None, "grad_norm=inf"),
    ({"td_loss": 0.5}, np.array([0.1, np.nan, np.inf], np.float32), "2 of 3 TD errors"),
])
def test_check_finite_names_the_iteration_and_the_values(losses: dict[str, float], td: np.ndarray | None,
                                                         named: str) -> None:
    with pytest.raises(TrainingDiverged, match=f"iteration 17: non-finite .*{named}"):
        check_finite(17, losses, td)
    check_finite(17, {"td_loss": 0.5, "q_mean": -3.0}, np.zeros(4, np.float32))  # finite: no error

