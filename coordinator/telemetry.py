"""Prometheus metrics of one coordinator app: request latency per route, chunk sizes, sample waits, policy
propagation, and (coordinator/observe/scrape.py) the run's counters read at scrape time.

Each app owns a `CollectorRegistry` (tests build many apps in one process; the global registry would refuse
the second). What the run already counts (env steps, chunks, lag at ingest, ...) is read from its components
when Prometheus scrapes, so the hot paths pay nothing for it; only what exists nowhere else is observed as it
happens, each observation a bisect and a lock (about a microsecond).
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rlfleet.shared.wire import PolicyRef

ROUTE_KEY = "rlfleet.route"  # set on the ASGI scope by layers that answer in front of FastAPI's router
_LATENCY_BUCKETS = (.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30)
_WAIT_BUCKETS = (.001, .005, .01, .05, .1, .25, .5, 1, 2, 5, 10)
_BYTES_BUCKETS = tuple(2.0 ** k for k in range(10, 27, 2))  # 1 KiB .. 64 MiB


class Telemetry:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram("rlfleet_http_request_duration_seconds",
                                 "time from request to response end, per route template (long polls included)",
                                 ["method", "route", "status"], registry=self.registry, buckets=_LATENCY_BUCKETS)
        self.chunk_bytes = Histogram("rlfleet_chunk_ingest_bytes", "payload size of each chunk taken into the buffer",
                                     registry=self.registry, buckets=_BYTES_BUCKETS)
        self.sample_wait = Histogram("rlfleet_sample_wait_seconds",
                                     "how long a sample request waited for the rate limiter or data",
                                     registry=self.registry, buckets=_WAIT_BUCKETS)
        self.propagation = Histogram(
            "rlfleet_policy_propagation_seconds",
            "from a policy's publish request to each heartbeat long poll answered with that version",
            registry=self.registry, buckets=_WAIT_BUCKETS)
        self._children: dict[tuple[str, str, int], Any] = {}
        self._published: dict[int, float] = {}
        self._run: Collector | None = None

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        child = self._children.get(key)
        if child is None:  # labels() costs more than observe(); a few dozen children in all
            child = self._children[key] = self.latency.labels(method, route, str(status))
        child.observe(seconds)

    def published(self, version: int, now: float) -> None:
        self._published[version] = now
        if len(self._published) > 16:  # only the newest versions are still propagating
            del self._published[min(self._published)]

    def policy_heard(self, newer_than: int | None, policy: PolicyRef | None, now: float) -> None:
        """A heartbeat is answered with `policy`: news to a long poll that asked for one newer than
        `newer_than` (a plain renewal says nothing about what its worker already knew)."""
        if newer_than is not None and policy is not None and policy.version > newer_than:
            start = self._published.get(policy.version)
            if start is not None:
                self.propagation.observe(now - start)

    def watch(self, collector: Collector) -> None:
        """Expose a run's counters (the app's lifespan may start again with a new run: it replaces the old)."""
        if self._run is not None:
            self.registry.unregister(self._run)
        self._run = collector
        self.registry.register(collector)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class RequestTimer:
    """Outermost ASGI layer: one latency observation per HTTP request, labelled with the route template
    (FastAPI's matched route, or what the fast path put in the scope; "other" when nothing matched, so raw
    paths never become labels). Costs two clock reads and a wrapped `send`."""

    def __init__(self, app: ASGIApp, telemetry: Telemetry) -> None:
        self.app = app
        self.telemetry = telemetry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def timed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            route = scope.get(ROUTE_KEY)
            if route is None:
                matched = scope.get("route")
                route = getattr(matched, "path", None) or "other"
            self.telemetry.observe_request(scope["method"], route, status, time.perf_counter() - start)
