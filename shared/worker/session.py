"""One worker's relationship with the coordinator: registration, lease heartbeats, and the latest directive.

The heartbeat runs in a daemon thread so a worker busy stepping envs or training never loses its lease. If
the coordinator no longer knows the worker (its lease expired, or the coordinator restarted), the session
registers again and bumps `generation`, telling the main loop to claim a task afresh.

Every background thread of a worker is started with `spawn`, so none can die quietly: an exception other
than Stopped records the process's fatal reason (`fail`) and sets the stop event, and `run_worker` exits
non-zero with it. A dead thread behind a live heartbeat would hold a lease while doing nothing, for ever.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TypeVar

from rlfleet.shared.wire import (
    ClaimResponse,
    CollectorTask,
    Directive,
    EvaluatorTask,
    HeartbeatResponse,
    LearnerTask,
    RegisterRequest,
    RegisterResponse,
    Task,
    WorkerKind,
)
from rlfleet.shared.worker.client import CoordinatorClient, CoordinatorRejected, CoordinatorUnavailable, Stopped

log = logging.getLogger(__name__)
T = TypeVar("T", CollectorTask, LearnerTask, EvaluatorTask)
# The coordinator could not be reached for long enough, or refused the worker for good: not a bug in the worker.
COORDINATOR_ERRORS = (CoordinatorUnavailable, CoordinatorRejected)


def one_line(exc: BaseException) -> str:
    """`Type: message` on one line (a pydantic ValidationError spans many), short enough for a log tail."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:500] if text else type(exc).__name__


class WorkerSession:
    def __init__(self, client: CoordinatorClient, kind: WorkerKind, name: str, restarts: int = 0,
                 last_error: str = "", registration: str | None = None) -> None:
        self.client = client
        # A fixed request id for every registration, instead of a fresh one each: a learner group's rank that
        # torchrun restarted gets its worker, and the learner task it held, back while that lease lasts,
        # instead of finding every rank's task still held by its former self.
        self.registration = registration
        self.kind: WorkerKind = kind
        self.name = name
        self.restarts = restarts
        self.last_error = " ".join(last_error.split())[:500]  # one line, within the wire's limit
        self.worker_id = ""
        self.run_name = ""
        self.generation = 0
        self.heartbeat_seconds = 2.0
        self.max_wait_seconds = 0.0  # no long poll until the coordinator said how long it may be
        self.fatal: BaseException | None = None
        self.fatal_reason = ""
        self._directive = Directive(run_state="running")
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def stop_event(self) -> threading.Event:
        return self.client.stop_event

    @property
    def directive(self) -> Directive:
        with self._lock:
            return self._directive

    def update(self, directive: Directive) -> None:
        with self._lock:
            self._directive = directive

    @property
    def running(self) -> bool:
        return not self.stop_event.is_set() and self.directive.run_state == "running" and self.fatal is None

    def fail(self, exc: BaseException, where: str) -> None:
        """Record why this process must end and stop all its loops; any thread may call it, the first reason
        wins (later errors are usually consequences of the first)."""
        with self._lock:
            first = self.fatal is None
            if first:
                self.fatal, self.fatal_reason = exc, f"{where}: {one_line(exc)}"
        if first:
            # The traceback of a bug goes to the log once; the coordinator's errors say all there is to say.
            log.error("%s failed: %s", where, one_line(exc),
                      exc_info=None if isinstance(exc, COORDINATOR_ERRORS) else exc)
        self.stop_event.set()

    def spawn(self, name: str, target: Callable[[], None]) -> threading.Thread:
        """Start a daemon thread whose death is never silent: Stopped (the stop event was set) is an expected
        ending; any other exception ends the whole process through `fail`."""
        def guarded() -> None:
            try:
                target()
            except Stopped:
                return
            except BaseException as exc:  # SystemExit too: in a thread it would vanish without a trace
                self.fail(exc, f"{name} thread")

        thread = threading.Thread(target=guarded, name=name, daemon=True)
        thread.start()
        return thread

    def register(self) -> RegisterResponse:
        # One id per logical registration, fixed before the first try: a retry after a lost reply gets the
        # same worker instead of a second one holding a lease nobody renews.
        request = RegisterRequest(kind=self.kind, name=self.name, restarts=self.restarts,
                                  last_error=self.last_error or None,
                                  request_id=self.registration or uuid.uuid4().hex)
        reply = self.client.call("POST", "/v1/workers", RegisterResponse, request)
        with self._lock:
            self.worker_id, self.run_name = reply.worker_id, reply.run_name
            self.heartbeat_seconds = reply.heartbeat_seconds
            self.max_wait_seconds = reply.max_wait_seconds
            self._directive = reply.directive
            self.generation += 1
        log.info("registered as %s %s (lease %.0fs)", self.kind, reply.worker_id, reply.lease_seconds)
        return reply

    def start_heartbeats(self) -> None:
        self._thread = self.spawn("heartbeat", self._heartbeat_loop)

    def long_poll_wait(self, wait: float) -> float:
        """`wait` clamped to what the heartbeat route accepts (a longer one is a 422) and to half the HTTP
        timeout (a longer one would time out and be retried instead of answered)."""
        return max(0.0, min(wait, self.max_wait_seconds, self.client.timeout / 2))

    def heartbeat(self, newer_than: int | None = None, wait: float = 0.0, while_paused: bool = False) -> Directive:
        """Renew the lease; with `newer_than`, the coordinator replies once a newer policy exists, with
        `while_paused`, once collection is no longer paused (or after `wait` seconds, clamped by
        `long_poll_wait`). The reply's directive (also the session's from now on)."""
        path = f"/v1/workers/{self.worker_id}/heartbeat"
        if newer_than is not None:
            path += f"?newer_than={newer_than}&wait={self.long_poll_wait(wait):g}"
        elif while_paused:
            path += f"?while_paused=true&wait={self.long_poll_wait(wait):g}"
        try:
            reply = self.client.call("POST", path, HeartbeatResponse)
            self.update(reply.directive)
            return reply.directive
        except CoordinatorRejected as exc:
            if exc.status != 404:
                raise
            log.warning("coordinator no longer knows worker %s (%s); registering again", self.worker_id, exc)
            return self.register().directive

    def wait_out_pause(self) -> None:
        """The directive says pause (the operator's, or the rate limiter's while collectors are ahead of the
        learner): wait in a heartbeat long poll the coordinator answers as soon as collection resumes, or after
        `heartbeat_seconds` (renewing the lease). Then look at the directive again.

        A coordinator that answers sooner while the pause goes on does not hold such polls (one from before
        them): then idle the directive's `pause_seconds`, its re-check interval, rather than poll in a loop."""
        wait = self.long_poll_wait(self.heartbeat_seconds)
        start = time.monotonic()
        self.heartbeat(while_paused=True, wait=wait)
        held = wait > 0 and time.monotonic() - start >= wait / 2
        pause = self.directive.pause_seconds
        if pause > 0 and not held:
            self.stop_event.wait(pause)

    def _heartbeat_loop(self) -> None:
        """Renew the lease every heartbeat_seconds. A collector makes each renewal a long poll for the next
        policy version, so a new policy reaches it within a round trip, not with its next chunk's ack.
        Run under `spawn`: a coordinator gone for good, or any bug, ends the process."""
        follow = self.kind == "collector"
        while self.directive.run_state == "running":
            if self.stop_event.wait(0.05 if follow else self.heartbeat_seconds):
                return
            policy = self.directive.policy
            if follow:
                self.heartbeat(newer_than=policy.version if policy else 0, wait=self.heartbeat_seconds)
            else:
                self.heartbeat()

    def claim(self) -> Task | None:
        """Claim a task, waiting while none is free; None once the run is no longer running."""
        while self.running:
            try:
                reply = self.client.call("POST", f"/v1/workers/{self.worker_id}/claim", ClaimResponse)
            except CoordinatorRejected as exc:
                if exc.status != 404:
                    raise
                self.register()
                continue
            self.update(reply.directive)
            if reply.task is not None:
                return reply.task
            self.stop_event.wait(max(0.2, self.heartbeat_seconds / 2))
        return None

    def tasks(self, kind: type[T]) -> Iterator[T]:
        """Each task this worker claims while the run is running (a new one after losing its lease)."""
        while self.running:
            task = self.claim()
            if task is None:
                return
            if not isinstance(task, kind):
                raise RuntimeError(f"a {self.kind} was given a {task.kind} task")
            yield task

    def close(self) -> None:
        self.stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.client.close()
