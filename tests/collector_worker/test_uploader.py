"""Uploader against a mocked coordinator (httpx.MockTransport) and a real store: a LocalStore, or SeaweedFS on
loopback for the object store."""

from __future__ import annotations

import errno
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch
from pydantic import ValidationError

from rlfleet.collector_worker.rollout import Chunk
from rlfleet.collector_worker.uploader import Pending, Uploader
from rlfleet.launcher.up import free_port
from rlfleet.shared.payloads.codec import decode_chunk
from rlfleet.shared.storage.layout import chunk_path
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.storage.protocol import PayloadStore, StoreUnavailable, sha256_hex
from rlfleet.shared.storage.s3 import S3Store
from rlfleet.shared.wire import (
    MAX_BODY_BYTES,
    ChunkAck,
    ChunkBatch,
    ChunkBatchAck,
    ChunkReport,
    ChunkVerdict,
    Directive,
    PolicyRef,
)
from rlfleet.shared.worker.client import CoordinatorClient, Stopped
from rlfleet.shared.worker.lifecycle import EXIT_CRASHED, EXIT_UNAVAILABLE, exit_code
from rlfleet.shared.worker.session import WorkerSession
from tests.support.seaweed import SeaweedFS

torch.set_num_threads(1)

TASK = "collect-0"


def make_chunk(seed: int, steps: int = 6, envs: int = 2, version: int = 0) -> Chunk:
    rng = np.random.default_rng(seed)
    arrays = {
        "obs": rng.normal(size=(steps, envs, 4)).astype(np.float32),
        "actions": rng.integers(0, 2, (steps, envs)).astype(np.int64),
        "rewards": np.ones((steps, envs), np.float32),
        "terminated": rng.random((steps, envs)) < 0.2,
        "truncated": rng.random((steps, envs)) < 0.1,
        "next_obs": rng.normal(size=(steps, envs, 4)).astype(np.float32),
        "valid": np.ones((steps, envs), bool),
    }
    return Chunk(arrays, [(3.0, 3, None), (11.0, 11, None)], policy_version=version)


class Coordinator:
    """Records every request and what the store held at that moment; replies via `respond`."""

    def __init__(self, store: PayloadStore, respond: Callable[[ChunkReport], httpx.Response]) -> None:
        self.store = store
        self.respond = respond
        self.requests: list[httpx.Request] = []
        self.reports: list[ChunkReport] = []
        self.file_at_report: list[bytes | None] = []
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        report = ChunkReport.model_validate_json(request.content)
        try:
            held: bytes | None = self.store.get(report.payload_path)
        except FileNotFoundError:
            held = None
        with self.lock:
            self.requests.append(request)
            self.reports.append(report)
            self.file_at_report.append(held)
        return self.respond(report)


def ack(directive: Directive | None = None) -> Callable[[ChunkReport], httpx.Response]:
    def respond(report: ChunkReport) -> httpx.Response:
        body = ChunkAck(chunk_id=report.chunk_id, duplicate=False,
                        directive=directive or Directive(run_state="running"))
        return httpx.Response(200, json=json.loads(body.model_dump_json()))
    return respond


def make_session(coordinator: Coordinator, patience: float = 30.0) -> WorkerSession:
    client = CoordinatorClient("http://coordinator.invalid", "token", max_unavailable_seconds=patience,
                               transport=httpx.MockTransport(coordinator))
    session = WorkerSession(client, "collector", "test-host")
    session.worker_id = "worker-1"
    return session


def run(session: WorkerSession, store: PayloadStore, items: list[Pending]) -> Uploader:
    uploader = Uploader(session, store, depth=2)
    for item in items:
        uploader.submit(item)
    uploader.close(timeout=20)
    assert not uploader._thread.is_alive()
    session.client.close()
    return uploader


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


def test_chunk_written_then_reported(store: LocalStore):
    coordinator = Coordinator(store, ack())
    session = make_session(coordinator)
    chunk = make_chunk(0, version=4)
    uploader = run(session, store, [Pending(chunk, TASK)])
    assert (uploader.acked, uploader.rejected) == (1, 0)

    (request,) = coordinator.requests
    assert request.method == "POST" and request.url.path == "/v1/chunks"
    assert request.headers["authorization"] == "Bearer token"
    (report,) = coordinator.reports
    assert report.payload_path == chunk_path(TASK, report.chunk_id)
    assert report.payload_path == f"chunks/{TASK}/{report.chunk_id}.msgpack"
    assert report.worker_id == "worker-1" and report.task_id == TASK and report.policy_version == 4
    assert report.env_steps == 12
    assert [(e.ret, e.length, e.opponent) for e in report.episodes] == chunk.episodes

    # the file was complete in the store before the report went out
    data = store.resolve(report.payload_path).read_bytes()
    assert coordinator.file_at_report == [data]
    assert report.sha256 == sha256_hex(data) and report.size_bytes == len(data)
    arrays, meta = decode_chunk(data)
    assert meta == {"task_id": TASK, "chunk_id": report.chunk_id, "policy_version": 4}
    assert set(arrays) == set(chunk.arrays)
    for name, value in chunk.arrays.items():
        assert arrays[name].dtype == value.dtype
        np.testing.assert_array_equal(arrays[name], value)
    # atomic write: no temp file left behind next to the payload
    assert [p.name for p in store.resolve(f"chunks/{TASK}").iterdir()] == [f"{report.chunk_id}.msgpack"]


def test_each_chunk_gets_its_own_id(store: LocalStore):
    coordinator = Coordinator(store, ack())
    uploader = run(make_session(coordinator), store, [Pending(make_chunk(k, version=k), TASK) for k in range(4)])
    assert uploader.acked == 4
    ids = [r.chunk_id for r in coordinator.reports]
    assert len(set(ids)) == 4
    assert [r.policy_version for r in coordinator.reports] == [0, 1, 2, 3]  # in submission order
    for report in coordinator.reports:
        assert sha256_hex(store.get(report.payload_path)) == report.sha256


def test_rejection_deletes_orphan_payload(store: LocalStore):
    def reject(report: ChunkReport) -> httpx.Response:
        return httpx.Response(409, json={"error": "unknown_task", "message": "task is gone"})

    coordinator = Coordinator(store, reject)
    session = make_session(coordinator)
    uploader = run(session, store, [Pending(make_chunk(1), TASK), Pending(make_chunk(2), TASK)])
    assert (uploader.acked, uploader.rejected) == (0, 2)
    for report, seen in zip(coordinator.reports, coordinator.file_at_report, strict=True):
        assert seen is not None  # it had been written...
        assert store.size(report.payload_path) is None  # ...and was removed after the 4xx
    assert session.fatal is None and session.running  # a rejection is not fatal


def test_ack_directive_is_applied(store: LocalStore):
    directive = Directive(run_state="stopped", env_steps_total=1234, pause_seconds=1.5,
                          policy=PolicyRef(version=7, path="policies/v00000007.safetensors", sha256="ab" * 32))
    coordinator = Coordinator(store, ack(directive))
    session = make_session(coordinator)
    assert session.directive.run_state == "running"
    run(session, store, [Pending(make_chunk(3), TASK)])
    assert session.directive == directive
    assert not session.running


def test_coordinator_unavailable_is_fatal(store: LocalStore):
    coordinator = Coordinator(store, lambda report: httpx.Response(503))
    session = make_session(coordinator, patience=0.2)
    uploader = run(session, store, [Pending(make_chunk(4), TASK)])
    assert uploader.acked == 0
    assert len(coordinator.requests) >= 2  # retried before giving up
    assert session.fatal is not None and session.stop_event.is_set()


def test_close_returns_after_fatal_with_full_queue(store: LocalStore):
    coordinator = Coordinator(store, lambda report: httpx.Response(503))
    session = make_session(coordinator, patience=0.5)
    uploader = Uploader(session, store, depth=2)
    for k in range(3):  # one in flight (retrying), two waiting: the queue is full
        uploader.submit(Pending(make_chunk(k), TASK))
    uploader._thread.join(10)
    assert session.fatal is not None and not uploader._thread.is_alive()
    closer = threading.Thread(target=uploader.close, kwargs={"timeout": 2}, daemon=True)
    closer.start()
    closer.join(3)
    hung = closer.is_alive()  # with the bug, this daemon thread stays blocked in queue.put
    session.client.close()
    assert not hung, "Uploader.close() hangs when its thread is gone and the queue is full"


# ----- failing loudly: an upload that cannot succeed ends the collector -----------------------------------------


def test_disk_full_fails_the_collector(store: LocalStore, monkeypatch: pytest.MonkeyPatch):
    def no_space(relpath: str, data: bytes) -> str:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store, "put", no_space)
    coordinator = Coordinator(store, ack())
    session = make_session(coordinator)
    uploader = Uploader(session, store, depth=2)
    uploader.submit(Pending(make_chunk(5), TASK))
    uploader._thread.join(10)
    assert not uploader._thread.is_alive()
    assert isinstance(session.fatal, OSError) and session.fatal.errno == errno.ENOSPC
    assert "No space left on device" in session.fatal_reason and session.fatal_reason.startswith("uploader thread")
    assert session.stop_event.is_set() and not session.running
    assert exit_code(session.fatal) == EXIT_CRASHED
    with pytest.raises(Stopped):  # the main loop learns of it at its next submit, and run_worker exits 4
        uploader.submit(Pending(make_chunk(6), TASK))
    uploader.close(timeout=5)
    session.client.close()
    assert coordinator.requests == []


def test_a_report_that_does_not_validate_fails_the_collector(store: LocalStore):
    chunk = make_chunk(7)
    chunk.episodes = [(float("nan"), 3, None)]  # say an env returned a NaN reward
    coordinator = Coordinator(store, ack())
    session = make_session(coordinator)
    uploader = run(session, store, [Pending(chunk, TASK)])
    assert uploader.acked == 0 and coordinator.requests == []
    assert isinstance(session.fatal, ValidationError)
    assert exit_code(session.fatal) == EXIT_CRASHED
    assert session.fatal_reason.startswith("uploader thread: ValidationError:") and "\n" not in session.fatal_reason


def test_a_chunk_the_object_store_did_not_take_is_never_reported(store: LocalStore, s3_env: SeaweedFS):
    """An object store that stays unreachable past its retries ends the collector with status 2 (the store's
    fault, not the collector's), and the chunk it could not upload is never reported, so never acknowledged."""
    dead = S3Store(s3_env.shared_bucket, "uploader", f"http://127.0.0.1:{free_port()}", retry_seconds=0.5)
    coordinator = Coordinator(store, ack())
    session = make_session(coordinator)
    uploader = run(session, dead, [Pending(make_chunk(8), TASK)])
    assert uploader.acked == 0 and coordinator.requests == []
    assert isinstance(session.fatal, StoreUnavailable) and "RLFLEET_S3_ENDPOINT_URL" in session.fatal_reason
    assert exit_code(session.fatal) == EXIT_UNAVAILABLE


def test_through_the_object_store_the_chunk_is_there_before_its_report(store: LocalStore, s3_env: SeaweedFS):
    s3 = S3Store(s3_env.shared_bucket, "uploader-ok", s3_env.endpoint)
    coordinator = Coordinator(store, ack())
    coordinator.store = s3  # what the coordinator would find when the report arrives
    session = make_session(coordinator)
    uploader = run(session, s3, [Pending(make_chunk(9), TASK)])
    (report,) = coordinator.reports
    assert uploader.acked == 1
    assert coordinator.file_at_report == [s3.get(report.payload_path, report.sha256)]


# ----- batched reports (collector.report_batch) -------------------------------------------------------------------


class BatchCoordinator:
    """Answers POST /v1/chunk-batches (and a lone report's POST /v1/chunks), refusing the chunk ids in
    `refuse` and, like the real one, any body above `max_body_bytes` (413); records each request's reports as a
    batch, and what the store held for them at that moment."""

    def __init__(self, store: PayloadStore, refuse: frozenset[str] = frozenset(),
                 max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.store, self.refuse, self.max_body_bytes = store, refuse, max_body_bytes
        self.batches: list[ChunkBatch] = []
        self.paths: list[str] = []
        self.body_sizes: list[int] = []
        self.missing_at_report = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        self.body_sizes.append(len(request.content))
        if len(request.content) > self.max_body_bytes:
            return httpx.Response(413, json={"error": "payload_too_large",
                                             "message": f"request body exceeds {self.max_body_bytes} bytes"})
        lone = request.url.path == "/v1/chunks"
        batch = (ChunkBatch(reports=[ChunkReport.model_validate_json(request.content)]) if lone
                 else ChunkBatch.model_validate_json(request.content))
        self.batches.append(batch)
        self.missing_at_report += sum(self.store.size(r.payload_path) is None for r in batch.reports)
        directive = Directive(run_state="running", env_steps_total=99)
        if lone:
            body: ChunkAck | ChunkBatchAck = ChunkAck(chunk_id=batch.reports[0].chunk_id, duplicate=False,
                                                      directive=directive)
        else:
            body = ChunkBatchAck(results=[ChunkVerdict(chunk_id=r.chunk_id, duplicate=False, **(
                {"error": "invalid", "message": "no"} if r.chunk_id in self.refuse else {})) for r in batch.reports],
                directive=directive)
        return httpx.Response(200, json=json.loads(body.model_dump_json()))


def batch_session(coordinator: BatchCoordinator) -> WorkerSession:
    client = CoordinatorClient("http://coordinator.invalid", "token", transport=httpx.MockTransport(coordinator))
    session = WorkerSession(client, "collector", "test-host")
    session.worker_id = "worker-1"
    return session


def test_a_full_batch_goes_in_one_request(store: LocalStore):
    coordinator = BatchCoordinator(store)
    session = batch_session(coordinator)
    uploader = Uploader(session, store, depth=2, report_batch=4, report_delay_seconds=30)
    for k in range(8):
        uploader.submit(Pending(make_chunk(k, version=k), TASK))
    uploader.flush()
    assert coordinator.paths == ["/v1/chunk-batches"] * 2
    assert [[r.policy_version for r in b.reports] for b in coordinator.batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert coordinator.missing_at_report == 0  # every payload was written before its report went out
    assert (uploader.acked, uploader.rejected, uploader.requests) == (8, 0, 2)
    assert session.directive.env_steps_total == 99  # the batch's directive was applied
    uploader.close(timeout=5)
    session.client.close()


def test_a_batch_larger_than_the_body_limit_goes_in_requests_below_it(store: LocalStore):
    """Reports grow with their chunk's episodes: a full batch of them would pass the coordinator's limit (every
    request 413 and every payload deleted). Split below the limit, every chunk is acknowledged, in order."""
    limit = 20_000
    coordinator = BatchCoordinator(store, max_body_bytes=limit)
    session = batch_session(coordinator)
    uploader = Uploader(session, store, depth=2, report_batch=8, report_delay_seconds=30, max_body_bytes=limit)
    for k in range(8):
        chunk = make_chunk(k, version=k)
        chunk.episodes = [(-1234.56789 - i, 1 + i, None) for i in range(150)]  # ~6 kB of JSON per report
        uploader.submit(Pending(chunk, TASK))
    uploader.flush()
    uploader.close(timeout=5)
    session.client.close()
    assert (uploader.acked, uploader.rejected) == (8, 0) and session.fatal is None
    assert max(coordinator.body_sizes) <= limit and len(coordinator.paths) == uploader.requests > 1
    assert [r.policy_version for b in coordinator.batches for r in b.reports] == list(range(8))
    assert sum(len(b.reports) for b in coordinator.batches) == 8 and coordinator.missing_at_report == 0


def test_held_reports_go_out_after_the_delay_without_a_full_batch(store: LocalStore):
    coordinator = BatchCoordinator(store)
    session = batch_session(coordinator)
    uploader = Uploader(session, store, depth=2, report_batch=16, report_delay_seconds=0.3)
    for k in range(3):
        uploader.submit(Pending(make_chunk(k), TASK))
    deadline = time.monotonic() + 10
    while uploader.acked < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert uploader.acked == 3 and [len(b.reports) for b in coordinator.batches] == [3]  # before any close
    uploader.close(timeout=5)
    session.client.close()
    assert uploader.requests == 1


def test_flush_and_close_report_what_is_held(store: LocalStore):
    coordinator = BatchCoordinator(store)
    session = batch_session(coordinator)
    uploader = Uploader(session, store, depth=2, report_batch=16, report_delay_seconds=30)
    uploader.submit(Pending(make_chunk(0), TASK))
    started = time.monotonic()
    uploader.flush()  # lockstep collection: nothing may wait for the delay
    assert uploader.acked == 1 and time.monotonic() - started < 5
    uploader.submit(Pending(make_chunk(1), TASK))
    uploader.close(timeout=5)  # a clean stop drops nothing it wrote
    session.client.close()
    assert uploader.acked == 2 and [len(b.reports) for b in coordinator.batches] == [1, 1]


def test_a_refused_report_in_a_batch_deletes_only_its_payload(store: LocalStore):
    probe = BatchCoordinator(store)
    session = batch_session(probe)
    uploader = Uploader(session, store, depth=2, report_batch=3, report_delay_seconds=30)
    ids: list[str] = []
    real_write = uploader._write

    def write(item: Pending) -> ChunkReport:
        report = real_write(item)
        ids.append(report.chunk_id)
        if len(ids) == 2:
            probe.refuse = frozenset({report.chunk_id})
        return report

    uploader._write = write  # type: ignore[method-assign]
    for k in range(3):
        uploader.submit(Pending(make_chunk(k), TASK))
    uploader.close(timeout=5)
    session.client.close()
    assert (uploader.acked, uploader.rejected) == (2, 1)
    kept = [store.size(chunk_path(TASK, i)) is not None for i in ids]
    assert kept == [True, False, True]
    assert session.fatal is None
