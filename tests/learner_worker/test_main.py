"""The whole learner in-process (real trainer, store and prefetcher; fake coordinator): how it ends and what it
reports when training diverges, its prefetch thread crashes, or a payload is unusable."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from rlfleet.learner_worker.cache import ChunkCache
from rlfleet.learner_worker.loops import ChunkTrainer
from rlfleet.learner_worker.trainer import TrainingDiverged, check_finite
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.wire import SampleResponse
from rlfleet.shared.worker.lifecycle import EXIT_CRASHED, EXIT_OK
from tests.support.configs import make_config, small_run_config
from tests.support.fake_coordinator import FakeCoordinator, make_session
from tests.support.learner import Payloads, learn, ppo_config, prioritized
from tests.support.policies import learner_task

torch.set_num_threads(1)
pytestmark = pytest.mark.timeout(120)


def test_nan_td_errors_end_the_learner_naming_the_iteration(tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """Divergence from the learner's own settings ends it loudly (a payload cannot cause one: the reader refuses
    non-finite and huge values, tests/learner_worker/test_cache.py)."""
    payloads = Payloads(tmp_path)
    fake = FakeCoordinator(learner_task(make_config(prioritized(), algo={"learning_rate": 1e38})))
    payloads.serve(fake)
    with caplog.at_level(logging.INFO):
        assert learn(fake, tmp_path) == EXIT_CRASHED
    last = caplog.records[-1].getMessage()
    assert re.match(r"learner exits with status 4: main thread: TrainingDiverged: training diverged at "
                    r"iteration \d+: non-finite td_loss=nan", last), last
    sent = [p.body["priorities"] for p in fake.of("priorities")]
    assert all(np.isfinite(p).all() for p in sent)  # NaN never sent as priorities
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
    chunks = trainer.fetcher.get(timeout=10)
    assert trainer.fetcher.get(timeout=10)
    trainer.stop()
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

