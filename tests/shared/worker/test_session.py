"""WorkerSession: registration ids reused across retries, long-poll waits clamped, threads that fail loudly."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from rlfleet.shared.wire import Directive, HeartbeatResponse
from rlfleet.shared.worker.client import CoordinatorUnavailable, Stopped
from rlfleet.shared.worker.lifecycle import EXIT_CRASHED, EXIT_UNAVAILABLE, exit_code
from rlfleet.shared.worker.session import one_line
from tests.support.fake_coordinator import FakeCoordinator, make_session, reply
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("short_backoff")]


# ----- request ids -------------------------------------------------------------------------------------------


def test_register_retry_reuses_its_request_id_and_each_registration_gets_a_new_one() -> None:
    fake = FakeCoordinator(fail_once={"register"})
    session = make_session(fake, "collector")
    session.register()
    session.register()
    session.close()
    attempts = fake.of("register")
    assert [a.status for a in attempts] == [503, 200, 200]
    ids = [a.body["request_id"] for a in attempts]
    assert ids[0] == ids[1], "a retry must carry the id of the first try"
    assert ids[2] != ids[0], "a new registration is a new logical request"
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)  # uuid4 hex


# ----- long-poll wait ----------------------------------------------------------------------------------------


def test_heartbeat_wait_is_clamped_to_the_coordinators_max_wait() -> None:
    fake = FakeCoordinator(lease_seconds=60.0, max_wait_seconds=1.5)
    session = make_session(fake, "collector")
    session.register()
    session.heartbeat(newer_than=3, wait=15.0)
    session.close()
    (beat,) = fake.of("heartbeat")
    assert beat.status == 200
    assert beat.request.url.params["newer_than"] == "3"
    assert float(beat.request.url.params["wait"]) == 1.5


def test_heartbeat_wait_stays_within_half_the_http_timeout() -> None:
    fake = FakeCoordinator(max_wait_seconds=30.0)
    session = make_session(fake, "collector", timeout=2.0)
    session.register()
    session.heartbeat(newer_than=0, wait=15.0)
    session.close()
    assert float(fake.of("heartbeat")[0].request.url.params["wait"]) == 1.0


def test_long_lease_heartbeat_loop_never_asks_for_more_than_max_wait() -> None:
    """RLFLEET_LEASE_SECONDS=60 gives heartbeat_seconds=15; a 15 s long poll used to be a 422 and a dead collector."""
    fake = FakeCoordinator(lease_seconds=60.0, max_wait_seconds=0.2)
    session = make_session(fake, "collector")
    session.register()
    assert session.heartbeat_seconds == 15.0
    session.start_heartbeats()
    wait_for(lambda: len(fake.of("heartbeat")) >= 2)
    session.close()
    beats = fake.of("heartbeat")
    assert {float(b.request.url.params["wait"]) for b in beats} == {0.2}
    assert all(b.status == 200 for b in beats)
    assert session.fatal is None


# ----- waiting out a pause -----------------------------------------------------------------------------------


def paused_heartbeats(fake: FakeCoordinator, hold: float, pause_seconds: float) -> None:
    """Heartbeats answered with a pause directive, after `hold` seconds (a coordinator holding the poll)."""
    def answer(request: httpx.Request) -> httpx.Response:
        time.sleep(hold)
        return reply(HeartbeatResponse(lease_seconds=fake.lease_seconds, directive=Directive(
            run_state="running", pause_seconds=pause_seconds)))

    fake.handlers["heartbeat"] = answer


def test_a_pause_is_waited_out_in_one_long_poll_of_a_heartbeat_period() -> None:
    fake = FakeCoordinator(lease_seconds=2.0, max_wait_seconds=1.0)
    paused_heartbeats(fake, hold=0.5, pause_seconds=0.3)  # held for the period asked for: lease / 4
    session = make_session(fake, "collector")
    session.register()
    start = time.monotonic()
    session.wait_out_pause()
    elapsed = time.monotonic() - start
    session.close()
    (beat,) = fake.of("heartbeat")
    assert beat.request.url.params["while_paused"] == "true" and float(beat.request.url.params["wait"]) == 0.5
    assert elapsed < 0.5 + 0.25  # held by the coordinator: no re-check interval on top
    assert session.directive.pause_seconds == 0.3


def test_a_coordinator_that_does_not_hold_paused_polls_is_re_checked_at_the_directives_interval() -> None:
    """One from before `while_paused` ignores it and answers at once: idle `pause_seconds` as collectors did
    then, instead of polling it in a loop."""
    fake = FakeCoordinator(lease_seconds=2.0, max_wait_seconds=1.0)
    paused_heartbeats(fake, hold=0.0, pause_seconds=0.3)
    session = make_session(fake, "collector")
    session.register()
    start = time.monotonic()
    session.wait_out_pause()
    assert time.monotonic() - start >= 0.3
    fake.max_wait_seconds = 0.0  # nor when no long poll may be asked for at all
    session.register()
    start = time.monotonic()
    session.wait_out_pause()
    assert time.monotonic() - start >= 0.3
    session.close()
    assert len(fake.of("heartbeat")) == 2


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
    session.close()
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
    session.close()
    assert isinstance(session.fatal, CoordinatorUnavailable)
    assert exit_code(session.fatal) == EXIT_UNAVAILABLE


def test_spawned_thread_ending_with_stopped_is_not_a_failure() -> None:
    session = make_session(FakeCoordinator(), "collector")

    def stopped() -> None:
        raise Stopped("stop event set while retrying")

    session.spawn("quiet", stopped).join(5)
    assert session.fatal is None and not session.stop_event.is_set()
    session.close()


@pytest.mark.parametrize("exc", [OSError(28, "No space left on device"), SystemExit(3), ValueError("x\ny")])
def test_spawned_thread_exception_records_a_one_line_reason_and_stops(exc: BaseException) -> None:
    session = make_session(FakeCoordinator(), "collector")

    def crash() -> None:
        raise exc

    session.spawn("worker-thread", crash).join(5)
    assert session.fatal is exc and session.stop_event.is_set()
    assert session.fatal_reason.startswith(f"worker-thread thread: {type(exc).__name__}")
    assert "\n" not in session.fatal_reason
    session.close()


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
    session.close()


def test_one_line_flattens_and_bounds_messages() -> None:
    assert one_line(ValueError("a\n  b\tc")) == "ValueError: a b c"
    assert one_line(KeyError()) == "KeyError"
    assert len(one_line(RuntimeError("x" * 2000))) == 500
