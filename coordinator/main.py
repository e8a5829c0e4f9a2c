"""Build the coordinator app: load the run, mount routers, map errors to JSON, run the housekeeping tick."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException as StarletteHTTPException

from rlfleet.coordinator.api.apidoc import API_DESCRIPTION, apply_scopes
from rlfleet.coordinator.api.fastpath import FastPath
from rlfleet.coordinator.api.middleware import BodySizeLimit, TokenGate
from rlfleet.coordinator.api.routes import (
    control,
    dashboard,
    data,
    evaluations,
    health,
    policies,
    run,
    schemas,
    tests,
    workers,
)
from rlfleet.coordinator.errors import CoordinatorError
from rlfleet.coordinator.gcpacing import GcPacing
from rlfleet.coordinator.journal.database import Journal
from rlfleet.coordinator.journal.lock import JournalInUse, JournalLock
from rlfleet.coordinator.observe.metrics import MetricsRecorder
from rlfleet.coordinator.observe.timeline import Timeline
from rlfleet.coordinator.observe.tracking import Tracking
from rlfleet.coordinator.overrides import parse_overrides
from rlfleet.coordinator.run import Run
from rlfleet.coordinator.runs import choose_run
from rlfleet.coordinator.settings import CoordinatorSettings
from rlfleet.coordinator.telemetry import RequestTimer, Telemetry
from rlfleet.coordinator.webui import DashboardPages
from rlfleet.shared.config.preflight import preflight
from rlfleet.shared.config.run_config import BudgetConfig, RunConfig, dump_run_config, load_run_config
from rlfleet.shared.config.threshold import threshold_note
from rlfleet.shared.loops import LOOPS
from rlfleet.shared.loops.kind import resolve
from rlfleet.shared.storage.factory import check_store, open_datasets, open_store
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.tokens import load_tokens_file
from rlfleet.shared.wire import ErrorBody

log = logging.getLogger("rlfleet.coordinator")
REQUEST_STORE_RETRY = 2.0  # seconds an object store may stay unreachable within one request's size check


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(ErrorBody(error=code, message=message).model_dump(), status_code=status, headers=headers)


def _describe(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:10]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


async def _tick_loop(app: FastAPI) -> None:
    """Housekeeping on the loop (cheap, in memory); file I/O (GC, metrics files, plots) in threads."""
    run_: Run = app.state.run
    recorder: MetricsRecorder = app.state.recorder
    settings: CoordinatorSettings = app.state.settings
    finished = not run_.ctx.lifecycle.running  # a resumed run that had already ended
    last_gc = asyncio.get_running_loop().time()
    pacing = GcPacing() if settings.gc_pacing else None
    while True:
        await asyncio.sleep(settings.tick_seconds)
        try:
            if pacing is not None:
                pacing.tick()
            run_.tick()
            await run_.ctx.settle()
            if asyncio.get_running_loop().time() - last_gc >= settings.gc_every_seconds:
                last_gc = asyncio.get_running_loop().time()
                await asyncio.to_thread(run_.ctx.payloads.collect_garbage, run_.housekeeping.referenced_payloads(),
                                        settings.orphan_grace_seconds)
            status = run_.status()
            app.state.timeline.record(status)
            await asyncio.to_thread(recorder.record, status)
            await asyncio.to_thread(recorder.record_evaluations, run_.evaluations.history(), list(run_.ctx.judge.tests))
            if status.run_state != "running" and not finished:
                finished = True
                log.info("run %s: %s (%s)", status.run_name, status.run_state, status.run_message)
                await asyncio.to_thread(recorder.finish, status)
        except Exception:  # the tick must survive a full disk or a plotting error; the API keeps serving
            log.exception("housekeeping tick failed")


def _config_of_run(settings: CoordinatorSettings) -> tuple[RunConfig, bool, BudgetConfig | None]:
    """The config file with its overrides, named after the run chosen by coordinator/runs.py; whether the
    user named that run (a stopped run named so continues); and the budget the overrides ask for, if they name
    one (a resumed run takes it instead of its own: `rlfleet up --resume NAME --set budget.max_wall_seconds=...`)."""
    overrides = parse_overrides(settings.overrides)
    named = overrides.get("name")
    if settings.run and named is not None and named != settings.run:
        raise ValueError(f"RLFLEET_RUN={settings.run} and the override name={named} name different runs; "
                         "set one of them")
    given = load_run_config(settings.config, overrides)
    base = preflight(given).config  # the env builds and the hooks load, before the app starts
    log.info("%s", threshold_note(given, base))
    choice = choose_run(settings.data_dir, base, settings.run or (base.name if named is not None else None))
    log.info("%s", choice.why)
    budget = base.budget if any(key.startswith("budget.") for key in overrides) else None
    return base.model_copy(update={"name": choice.name}), choice.explicit, budget


def create_app(settings: CoordinatorSettings | None = None) -> FastAPI:
    settings = settings or CoordinatorSettings()
    config, named, budget = _config_of_run(settings)
    tokens = load_tokens_file(settings.tokens_file)
    target = settings.store_target()  # a wrong store setting is refused here, before the app starts
    # Size checks answer a request: past botocore's own retries, a 503 (the worker retries) beats a thread held
    # for the store's whole retry window. Starting up waits that window out (retrying, naming the setting).
    request_target = None if target is None else dataclasses.replace(target, retry_seconds=REQUEST_STORE_RETRY)
    telemetry = Telemetry()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        layout = RunLayout(settings.data_dir, config.name, target)
        layout.run_dir.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(check_store, target)
        store = open_store(dataclasses.replace(layout, store=request_target), "store")
        log.info("payload store: %s", store.describe())
        journal_path = settings.db_path or layout.journal
        try:  # before the journal is opened: a second coordinator must not even read state the first one moves on
            journal_lock = JournalLock.acquire(journal_path)
        except JournalInUse as exc:
            log.error("%s", exc)
            raise
        tracking = Tracking()
        try:
            journal = Journal(journal_path, settings.db_synchronous)
            app.state.run = Run(
                config, store, lease_seconds=settings.lease_seconds,
                sample_wait_seconds=settings.sample_wait_seconds, keep_policies=settings.keep_policies,
                journal=journal, max_workers=settings.max_workers,
                idempotency_seconds=settings.idempotency_seconds, reopen_stopped=named, budget=budget,
                telemetry=telemetry,
                dataset_store=open_datasets(settings.data_dir, request_target), max_body_bytes=settings.max_body_bytes,
                checkpoints=open_store(dataclasses.replace(layout, store=request_target), "checkpoints"),
                checkpoint_sources=settings.checkpoint_roots(),
            )
            # Workers are told a run state once it is durable: the first request must not find a resumed stopped
            # run still announced as stopped (its workers would exit) while its reopening is being committed.
            await asyncio.to_thread(journal.committer.drain)
            telemetry.watch(app.state.run.metrics())
            app.state.timeline.resume(layout.metrics_csv, app.state.run.ctx.data.buffer.capacity)
            layout.config_file.write_text(dump_run_config(app.state.run.ctx.config))
            # The trackers of the config the run goes on with (a resumed run's own); each imports its library in
            # its own thread, so nothing here waits for one.
            tracking = app.state.run.tracking = Tracking.of(app.state.run.ctx.config, layout)
            tracking.start(app.state.run.ctx.config)
            app.state.recorder = MetricsRecorder(layout, evaluations_written=len(app.state.run.ctx.judge.results),
                                                 tests_written=len(app.state.run.ctx.judge.tests), tracking=tracking)
            ticker = asyncio.create_task(_tick_loop(app))
            log.info("run %s ready: data in %s", config.name, layout.run_dir)
            try:
                yield
            finally:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker
                try:
                    app.state.recorder.record_evaluations(app.state.run.evaluations.history(),
                                                          list(app.state.run.ctx.judge.tests))
                    app.state.recorder.finish(app.state.run.status())
                except Exception:  # a failed final plot must not turn a clean shutdown into a crash
                    log.exception("could not write the run's final metrics")
                app.state.recorder.close()
                app.state.run.ctx.close()
                journal.close()
        finally:  # however the start or the run ends: the next coordinator may take the journal
            try:  # once the trackers have written what they hold (bounded: a stuck one is left behind)
                await asyncio.to_thread(tracking.close)
            finally:
                journal_lock.release()

    # Swagger UI and ReDoc from the assets in fastapi-offline's wheel: /docs works with no internet.
    app = FastAPIOffline(
        title="rlfleet coordinator",
        version="1",
        summary="Owns a distributed RL run: workers, tasks, replay metadata, policies, evaluations.",
        description=API_DESCRIPTION,
        lifespan=lifespan,
        swagger_ui_parameters={"validatorUrl": None},  # Swagger UI would otherwise ask validator.swagger.io
    )
    app.state.settings = settings
    app.state.tokens = tokens
    app.state.telemetry = telemetry
    app.state.timeline = Timeline()
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(TokenGate, tokens=tokens, open_reads=settings.open_reads)
    app.add_middleware(DashboardPages)  # GET / and its assets
    app.add_middleware(RequestTimer, telemetry=telemetry)  # outermost: times everything behind it
    for module in (workers, data, policies, evaluations, tests, run, control, schemas, dashboard, health):
        app.include_router(module.router)
    for kind in LOOPS.values():  # every kind's routes in every run: the REST contract does not depend on the run
        if kind.router is not None:
            app.include_router(resolve(kind.router))
    build_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        """FastAPI's document (cached by FastAPI), with each operation's security requirement from its scope."""
        return apply_scopes(build_openapi())

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(CoordinatorError)
    async def _domain(_: Request, exc: CoordinatorError) -> JSONResponse:
        return _error(exc.status, exc.code, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(422, "invalid", _describe(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed"}.get(
            exc.status_code, "http_error")
        return _error(exc.status_code, code, str(exc.detail), getattr(exc, "headers", None))

    return app


def serve_app(settings: CoordinatorSettings | None = None) -> Any:
    """The ASGI app the server runs: the FastAPI app behind the heartbeat and health fast path (when on)."""
    settings = settings or CoordinatorSettings()
    app = create_app(settings)
    return FastPath(app, settings.max_body_bytes) if settings.fast_path else app
