"""run_session: how a worker's ending (in any of its threads) becomes its exit status and last log line."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import httpx
import pytest

from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.worker.client import CoordinatorUnavailable, Stopped
from rlfleet.shared.worker.lifecycle import EXIT_CRASHED, EXIT_OK, EXIT_UNAVAILABLE, run_session
from rlfleet.shared.worker.session import WorkerSession
from tests.support.fake_coordinator import FakeCoordinator, error, make_session

pytestmark = pytest.mark.timeout(60)


def run(fake: FakeCoordinator, body, tmp_path: Path, **kwargs) -> int:
    return run_session(make_session(fake, "learner", **kwargs), tmp_path, body)


def test_a_body_that_returns_is_exit_0(tmp_path: Path) -> None:
    seen: list[str] = []

    def body(session: WorkerSession, layout: RunLayout) -> None:
        seen.append(layout.run_dir.name)

    assert run(FakeCoordinator(), body, tmp_path) == EXIT_OK
    assert seen == ["test-run"]


def test_stopped_is_an_expected_ending(tmp_path: Path) -> None:
    def body(session: WorkerSession, layout: RunLayout) -> None:
        session.stop_event.set()
        raise Stopped("asked to stop")

    assert run(FakeCoordinator(), body, tmp_path) == EXIT_OK


def test_an_exception_in_the_main_thread_is_exit_4_with_a_one_line_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def body(session: WorkerSession, layout: RunLayout) -> None:
        raise ZeroDivisionError("bug in the loop")

    with caplog.at_level(logging.INFO):
        assert run(FakeCoordinator(), body, tmp_path) == EXIT_CRASHED
    assert caplog.records[-1].getMessage() == (
        "learner exits with status 4: main thread: ZeroDivisionError: bug in the loop")


def test_a_background_thread_failure_is_exit_4_even_when_the_body_ends_normally(tmp_path: Path) -> None:
    """The collector's old failure: its uploader died, the main loop saw Stopped, and the process exited 0."""
    def body(session: WorkerSession, layout: RunLayout) -> None:
        def disk_full() -> None:
            raise OSError(28, "No space left on device")

        session.spawn("uploader", disk_full)
        deadline = time.monotonic() + 10
        while session.running and time.monotonic() < deadline:
            time.sleep(0.01)
        raise Stopped("the uploader has stopped")

    assert run(FakeCoordinator(), body, tmp_path) == EXIT_CRASHED


def test_coordinator_unavailable_is_exit_2(tmp_path: Path) -> None:
    def body(session: WorkerSession, layout: RunLayout) -> None:
        raise CoordinatorUnavailable("gave up after 120s")

    assert run(FakeCoordinator(), body, tmp_path) == EXIT_UNAVAILABLE


def test_registration_refused_is_exit_2(tmp_path: Path) -> None:
    fake = FakeCoordinator()
    fake.handlers["register"] = lambda request: error(403, "forbidden", "wrong scope")
    assert run(fake, lambda session, layout: None, tmp_path) == EXIT_UNAVAILABLE


def test_heartbeat_thread_losing_the_coordinator_is_exit_2(tmp_path: Path) -> None:
    fake = FakeCoordinator(lease_seconds=0.04)  # heartbeats every 10 ms

    def body(session: WorkerSession, layout: RunLayout) -> None:
        fake.handlers["heartbeat"] = lambda request: httpx.Response(503)
        session.stop_event.wait(10)

    assert run(fake, body, tmp_path, patience=0.2) == EXIT_UNAVAILABLE
