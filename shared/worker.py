"""The life of every worker process: connect, register, keep the lease, run the body, map endings to exit codes.

Exit codes: 0 when the run ended (solved, out of budget, stopped) or the worker was asked to stop; 2 when the
coordinator stayed unreachable longer than `max_unavailable_seconds` or refused the worker for good.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from shared.client import CoordinatorClient, CoordinatorRejected, CoordinatorUnavailable, Stopped
from shared.layout import RunLayout
from shared.session import WorkerSession
from shared.settings import WorkerSettings
from shared.wire import WorkerKind

log = logging.getLogger("rlfleet.worker")
EXIT_OK, EXIT_UNAVAILABLE = 0, 2


def run_worker(settings: WorkerSettings, kind: WorkerKind,
               body: Callable[[WorkerSession, RunLayout], None]) -> int:
    client = CoordinatorClient(settings.coordinator_url, settings.resolve_token(kind),
                               timeout=settings.http_timeout_seconds,
                               max_unavailable_seconds=settings.max_unavailable_seconds)
    session = WorkerSession(client, kind, settings.worker_name, settings.restarts)
    try:
        session.register()
        session.start_heartbeats()
        body(session, RunLayout(settings.data_dir, session.run_name))
    except Stopped:
        pass
    except (CoordinatorUnavailable, CoordinatorRejected) as exc:
        log.error("%s: %s", kind, exc)
        return EXIT_UNAVAILABLE
    finally:
        session.close()
    if session.fatal is not None:
        return EXIT_UNAVAILABLE
    log.info("%s done: run %s", kind, session.directive.run_state)
    return EXIT_OK
