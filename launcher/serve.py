"""`rlfleet coordinator | collector | learner | evaluator`: one service, run in this process until the run ends.

Each imports its service's modules only once called (the `rlfleet` command loads nothing heavy up front), and the
light workers, collectors and the evaluator, first wait for the coordinator (launcher/readiness.py) so that their
imports do not compete for the cores with the coordinator's and the learner's start-up.
"""

from __future__ import annotations

import typer

from rlfleet.launcher.readiness import await_coordinator
from rlfleet.launcher.startup import configure_logging, without_field_docs


def coordinator() -> int:
    """Serve the coordinator until it is stopped; 2 when its store settings are wrong (the message says which)."""
    import uvicorn

    from rlfleet.coordinator.main import serve_app
    from rlfleet.coordinator.settings import CoordinatorSettings
    from rlfleet.shared.storage.factory import StoreConfigError

    configure_logging()
    settings = CoordinatorSettings()
    try:
        app = serve_app(settings)
    except StoreConfigError as exc:
        typer.echo(f"rlfleet coordinator: {exc}", err=True)
        return 2
    # uvloop + httptools (uvicorn's "auto" picks them), no access log and no proxy-headers layer (nothing reads
    # the client's address): per-request CPU is what limits a fleet of a thousand collectors on one core; the
    # backlog takes a whole fleet reconnecting at once.
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning",
                access_log=False, proxy_headers=False, backlog=4096, timeout_graceful_shutdown=10)
    return 0


def collector() -> int:
    await_coordinator()  # before the imports below
    without_field_docs()
    from rlfleet.collector_worker.main import run_collector
    from rlfleet.shared.worker.settings import WorkerSettings

    configure_logging()
    return run_collector(WorkerSettings())


def learner() -> int:
    without_field_docs()
    from rlfleet.learner_worker.main import run_learner
    from rlfleet.shared.worker.settings import WorkerSettings

    configure_logging()
    return run_learner(WorkerSettings())


def evaluator() -> int:
    await_coordinator()  # before the imports below
    without_field_docs()
    from rlfleet.evaluator.main import run_evaluator
    from rlfleet.shared.worker.settings import WorkerSettings

    configure_logging()
    return run_evaluator(WorkerSettings())
