"""The life of every worker process: connect, register, keep the lease, run the body, map endings to exit codes.

Exit codes, for supervisors (compose `restart: on-failure`, `rlfleet up`) that restart on anything but 0:

- 0 (EXIT_OK): an expected ending: the run ended (solved, out of budget, stopped) or the worker was asked to stop.
- 2 (EXIT_UNAVAILABLE): the coordinator stayed unreachable longer than `max_unavailable_seconds`, or refused the
  worker for good (a 4xx it cannot recover from); or the store settings are wrong, or the object store stayed
  unreachable past its retries (the reason names the setting).
- 4 (EXIT_CRASHED): anything else that ended the worker, in any of its threads (uploader, prefetch, heartbeat,
  the main loop): a full disk, a payload that cannot be encoded, a learner whose training diverged, a bug.

Either way the last log line names the reason on one line (`<kind> exits with status N: <thread>: <error>`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from rlfleet.shared.storage.factory import StoreConfigError, StoreTarget, check_store
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.storage.protocol import StoreUnavailable
from rlfleet.shared.wire import WorkerKind
from rlfleet.shared.worker.client import CoordinatorClient, Stopped
from rlfleet.shared.worker.session import COORDINATOR_ERRORS, WorkerSession
from rlfleet.shared.worker.settings import WorkerSettings

log = logging.getLogger("rlfleet.worker")
EXIT_OK, EXIT_UNAVAILABLE, EXIT_CRASHED = 0, 2, 4

Body = Callable[[WorkerSession, RunLayout], None]


def exit_code(fatal: BaseException) -> int:
    """The exit status for a fatal error: the coordinator's fault (2) or the worker's own crash (4)."""
    return EXIT_UNAVAILABLE if isinstance(fatal, (*COORDINATOR_ERRORS, StoreUnavailable)) else EXIT_CRASHED


def run_worker(settings: WorkerSettings, kind: WorkerKind, body: Body, registration: str | None = None) -> int:
    try:
        store = settings.store_target()
    except StoreConfigError as exc:  # refused before registering: nothing could be stored anyway
        log.error("%s exits with status %d: %s", kind, EXIT_UNAVAILABLE, exc)
        return EXIT_UNAVAILABLE
    client = CoordinatorClient(settings.coordinator_url, settings.resolve_token(kind),
                               timeout=settings.http_timeout_seconds,
                               max_unavailable_seconds=settings.max_unavailable_seconds)
    return run_session(WorkerSession(client, kind, settings.worker_name, settings.restarts, settings.last_error,
                                     registration), settings.data_dir, body, store)


def run_session(session: WorkerSession, data_dir: Path, body: Body, store: StoreTarget | None = None) -> int:
    """Reach the store, register, heartbeat, run `body` in this thread; the exit status from how it ended (see
    the module doc). `store`: the object store of the run's payloads, None for the data directory. The store
    comes first: a worker that cannot store anything should not hold a lease (its retries may outlast it)."""
    try:
        check_store(store)
        session.register()
        session.start_heartbeats()
        body(session, RunLayout(data_dir, session.run_name, store))
    except Stopped:
        pass  # the stop event was set: the run ended, or another thread failed (recorded in session.fatal)
    except Exception as exc:
        session.fail(exc, "main thread")
    finally:
        session.close()
    if session.fatal is not None:
        code = exit_code(session.fatal)
        log.error("%s exits with status %d: %s", session.kind, code, session.fatal_reason)
        return code
    log.info("%s done: run %s", session.kind, session.directive.run_state)
    return EXIT_OK
