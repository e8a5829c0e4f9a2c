"""WorkerSession: threads that fail loudly."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from shared.client import CoordinatorUnavailable, Stopped
from shared.session import WorkerSession, one_line
from shared.worker import EXIT_CRASHED, EXIT_UNAVAILABLE, exit_code
from tests.shared.fake_coordinator import FakeCoordinator, make_session

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shared.client.random.random", lambda: 0.0)


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def closed(session: WorkerSession) -> WorkerSession:
    session.close()
    return session


# ----- failing loudly ----------------------------------------------------------------------------------------


def test_an_unexpected_heartbeat_error_fails_the_session() -> None:
    fake = FakeCoordinator()
    session = make_session(fake, "learner")
    session.register()
    session.heartbeat_seconds = 0.01

    def boom(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("transport bug")

    fake.handlers["heartbeat"] = boom
    session.start_heartbeats()
    wait_for(session.stop_event.is_set)
    closed(session)
    assert isinstance(session.fatal, RuntimeError)
    assert session.fatal_reason == "heartbeat thread: RuntimeError: transport bug"
    assert not session.running
    assert exit_code(session.fatal) == EXIT_CRASHED


def test_heartbeat_with_the_coordinator_gone_fails_with_unavailable() -> None:
    fake = FakeCoordinator()
    session = make_session(fake, "learner", patience=0.2)
    session.register()
    session.heartbeat_seconds = 0.01
    fake.handlers["heartbeat"] = lambda request: httpx.Response(503)
    session.start_heartbeats()
    wait_for(session.stop_event.is_set)
    closed(session)
    assert isinstance(session.fatal, CoordinatorUnavailable)
    assert exit_code(session.fatal) == EXIT_UNAVAILABLE


def test_spawned_thread_ending_with_stopped_is_not_a_failure() -> None:
    session = make_session(FakeCoordinator(), "collector")

    def stopped() -> None:
        raise Stopped("stop event set while retrying")

    session.spawn("quiet", stopped).join(5)
    assert session.fatal is None and not session.stop_event.is_set()
    closed(session)


@pytest.mark.parametrize("exc", [OSError(28, "No space left on device"), SystemExit(3), ValueError("x\ny")])
def test_spawned_thread_exception_records_a_one_line_reason_and_stops(exc: BaseException) -> None:
    session = make_session(FakeCoordinator(), "collector")

    def crash() -> None:
        raise exc

    session.spawn("worker-thread", crash).join(5)
    assert session.fatal is exc and session.stop_event.is_set()
    assert session.fatal_reason.startswith(f"worker-thread thread: {type(exc).__name__}")
    assert "\n" not in session.fatal_reason
    closed(session)


def test_the_first_failure_wins() -> None:
    session = make_session(FakeCoordinator(), "collector")
    first, later = OSError("disk full"), RuntimeError("consequence")
    barrier = threading.Barrier(2)

    def fail_first() -> None:
        session.fail(first, "uploader thread")
        barrier.wait()

    thread = threading.Thread(target=fail_first)
    thread.start()
    barrier.wait()
    session.fail(later, "main thread")
    thread.join()
    assert session.fatal is first and session.fatal_reason == "uploader thread: OSError: disk full"
    closed(session)


def test_one_line_flattens_and_bounds_messages() -> None:
    assert one_line(ValueError("a\n  b\tc")) == "ValueError: a b c"
    assert one_line(KeyError()) == "KeyError"
    assert len(one_line(RuntimeError("x" * 2000))) == 500
