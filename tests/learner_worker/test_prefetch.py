"""Prefetcher against a fake coordinator and a real store: request ids, corrupt reports, failing loudly."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from pydantic import ValidationError

from rlfleet.learner_worker.cache import ChunkCache, PayloadReader
from rlfleet.learner_worker.prefetch import ChunkFetcher, Prefetcher
from rlfleet.shared.config.plan import chunk_schema
from rlfleet.shared.wire import SampledChunk, SampleRequest
from rlfleet.shared.worker.lifecycle import EXIT_CRASHED, exit_code
from rlfleet.shared.worker.session import WorkerSession
from tests.support.fake_coordinator import FakeCoordinator, error, make_session, reply
from tests.support.learner import Payloads, ppo_config
from tests.support.policies import SAMPLING, learner_task
from tests.support.stored_chunks import GAMMA, NSTEP, SCHEMA, StoredChunks
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("short_backoff")]
BUFFER = "replay-0"


def serve(fake: FakeCoordinator, fx: StoredChunks) -> None:
    """Sample replies drawing row k of chunk k % 3 for item k."""
    def sample(request: httpx.Request) -> httpx.Response:
        ask = SampleRequest.model_validate_json(request.content)
        items = ask.batch_size * ask.num_batches
        return reply(fx.sample([(k % 3, k % 16) for k in range(items)], batch_size=ask.batch_size))
    fake.handlers["sample"] = sample


def started(fake: FakeCoordinator, fx: StoredChunks, **kwargs) -> tuple[WorkerSession, Prefetcher]:
    session = make_session(fake, "learner", **kwargs)
    session.register()
    cache = ChunkCache(fx.store, SCHEMA, GAMMA, NSTEP, max_chunks=8)
    return session, Prefetcher(session, cache, BUFFER, batch_size=4, batches_per_request=2)


def finish(session: WorkerSession, prefetch: Prefetcher) -> None:
    prefetch.stop()
    assert not prefetch._thread.is_alive()
    session.close()


def test_a_retried_sample_carries_the_id_of_its_first_try(fx: StoredChunks) -> None:
    fake = FakeCoordinator(fail_once={"sample"})
    serve(fake, fx)
    session, prefetch = started(fake, fx)
    assert prefetch.get(timeout=10) is not None
    wait_for(lambda: len(fake.of("sample")) >= 3)
    finish(session, prefetch)
    attempts = fake.of("sample")
    assert [a.status for a in attempts[:3]] == [503, 200, 200]
    ids = [a.body["request_id"] for a in attempts]
    assert ids[0] == ids[1], "the retry must reuse the first try's id"
    assert len(set(ids[1:])) == len(ids) - 1, "every new sample call is a new logical request"


def test_nan_priorities_end_the_learner_instead_of_hanging_it(fx: StoredChunks) -> None:
    fake = FakeCoordinator()
    serve(fake, fx)
    session, prefetch = started(fake, fx)
    batch = prefetch.get(timeout=10)
    assert batch is not None
    prefetch.send_priorities(batch["ids"], np.full(len(batch["ids"]), np.nan))
    wait_for(lambda: prefetch.get(timeout=0.01) is None and session.stop_event.is_set())  # train on meanwhile
    wait_for(lambda: not prefetch._thread.is_alive())
    assert isinstance(session.fatal, ValidationError)
    assert session.fatal_reason.startswith("prefetch thread: ValidationError:")
    assert exit_code(session.fatal) == EXIT_CRASHED
    assert not session.running  # the training loop's condition: it stops instead of waiting for batches
    assert fake.of("priorities") == []  # never sent
    finish(session, prefetch)


def test_an_unexpected_cache_error_ends_the_learner(fx: StoredChunks, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: ChunkCache, sample: object) -> list:
        raise MemoryError("cannot allocate the batch")

    monkeypatch.setattr(ChunkCache, "batches", broken)
    fake = FakeCoordinator()
    serve(fake, fx)
    session, prefetch = started(fake, fx)
    wait_for(session.stop_event.is_set)
    assert prefetch.get(timeout=0.01) is None and not session.running
    assert isinstance(session.fatal, MemoryError) and exit_code(session.fatal) == EXIT_CRASHED
    finish(session, prefetch)


def test_a_directory_for_a_payload_is_reported_and_skipped(fx: StoredChunks) -> None:
    path = fx.store.root / fx.refs[1].payload_path
    path.unlink()
    path.mkdir()
    fake = FakeCoordinator()
    serve(fake, fx)
    session, prefetch = started(fake, fx)
    batches = [prefetch.get(timeout=10) for _ in range(3)]
    wait_for(lambda: len(fake.of("corrupt")) >= 1)
    finish(session, prefetch)
    assert session.fatal is None
    assert all(b is not None and set(b["obs"][:, 0].tolist()) <= {0.0, 2.0} for b in batches)  # chunk 1 skipped
    report = fake.of("corrupt")[0]
    assert report.request.url.path == f"/v1/buffers/{BUFFER}/corrupt"
    assert report.body["worker_id"] == "worker-1" and report.body["chunk_id"] == "chunk1"
    assert report.body["reason"].startswith("IsADirectoryError")


def test_a_refused_corrupt_report_is_not_fatal(fx: StoredChunks) -> None:
    fx.store.put(fx.refs[0].payload_path, b"overwritten")  # sha256 mismatch
    fake = FakeCoordinator()
    serve(fake, fx)
    fake.handlers["corrupt"] = lambda request: error(404, "not_found", "chunk not in the buffer")
    session, prefetch = started(fake, fx)
    assert prefetch.get(timeout=10) is not None
    wait_for(lambda: len(fake.of("corrupt")) >= 2)
    finish(session, prefetch)
    assert session.fatal is None and prefetch.error is None
    assert {r.body["chunk_id"] for r in fake.of("corrupt")} == {"chunk0"}


def test_a_lost_lease_is_handed_to_the_training_loop(fx: StoredChunks) -> None:
    fake = FakeCoordinator()
    fake.handlers["sample"] = lambda request: error(404, "unknown_worker", "lease expired")
    session, prefetch = started(fake, fx)
    wait_for(lambda: prefetch.error is not None)
    with pytest.raises(Exception, match="lease expired"):
        prefetch.get(timeout=0.01)
    assert session.fatal is None  # the training loop registers again: not a crash
    finish(session, prefetch)


def chunk_fetcher(tmp_path: Path, ahead: bool) -> tuple[FakeCoordinator, WorkerSession, ChunkFetcher, list[str]]:
    """A chunk fetcher over a fake coordinator that serves the same chunks to every sample call; the names of the
    threads that decoded them."""
    payloads = Payloads(tmp_path, logp=True)
    fake = FakeCoordinator()
    payloads.serve(fake)
    session = make_session(fake, "learner")
    session.register()
    task = learner_task(ppo_config())
    reader = PayloadReader(payloads.store, chunk_schema(task.spaces, SAMPLING, task.env))
    decoders: list[str] = []
    read = reader.read

    def recorded(ref: SampledChunk) -> dict[str, np.ndarray] | None:
        decoders.append(threading.current_thread().name)
        return read(ref)

    reader.read = recorded  # type: ignore[method-assign]
    return fake, session, ChunkFetcher(session, reader, "replay-0", ahead=ahead), decoders


def test_force_sync_chunks_are_decoded_off_the_training_thread_and_taken_only_when_asked(tmp_path: Path) -> None:
    """With max_policy_lag 0 a batch taken during an update would be trained on one version late: the fetcher
    takes one only when the training loop asks, after its publish."""
    fake, session, fetcher, decoders = chunk_fetcher(tmp_path, ahead=False)
    time.sleep(0.3)
    assert fake.of("sample") == []  # nothing asked yet
    assert len(fetcher.get(timeout=10)) == 3
    time.sleep(0.3)  # "training"
    assert len(fake.of("sample")) == 1
    assert len(fetcher.get(timeout=10)) == 3
    fetcher.stop()
    session.close()
    assert len(fake.of("sample")) == 2
    assert decoders and threading.main_thread().name not in decoders


def test_force_sync_asks_once_however_often_the_training_loop_polls(tmp_path: Path) -> None:
    """The training loop polls every 0.5 s while the coordinator holds the sample call (it waits up to
    max_wait_seconds for a full batch). Each poll asking again would leave an ask standing once the batch came, and
    the fetcher would take the next batch during the update: on Pong, 15% of all chunks went stale that way, and
    half the updates trained on one collector's chunk."""
    fake, session, fetcher, decoders = chunk_fetcher(tmp_path, ahead=False)
    serve = fake.handlers["sample"]

    def held(request):  # the coordinator waiting for the collectors' chunks
        time.sleep(0.4)
        return serve(request)

    fake.handlers["sample"] = held
    chunks: list = []
    while not chunks:
        chunks = fetcher.get(timeout=0.05)
    time.sleep(0.8)  # "training": a second call would have come and gone by now
    assert len(fake.of("sample")) == 1
    fetcher.stop()
    session.close()


def test_an_async_run_s_next_batch_is_taken_and_decoded_while_the_current_one_trains(tmp_path: Path) -> None:
    fake, session, fetcher, decoders = chunk_fetcher(tmp_path, ahead=True)
    assert len(fetcher.get(timeout=10)) == 3
    wait_for(lambda: len(decoders) == 6, timeout=10)  # the next batch, decoded while this one trains
    time.sleep(0.3)
    assert len(fake.of("sample")) == 2  # one batch ahead at most
    fetcher.stop()
    session.close()
    assert threading.main_thread().name not in decoders
