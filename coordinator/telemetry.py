"""Prometheus metrics of one coordinator app: request latency per route, chunk sizes, sample waits, policy
propagation, and the run's counters read at scrape time.

Each app owns a `CollectorRegistry` (tests build many apps in one process; the global registry would refuse
the second). What the run already counts (env steps, chunks, lag at ingest, ...) is read from its components
when Prometheus scrapes, so the hot paths pay nothing for it; only what exists nowhere else is observed as it
happens, each observation a bisect and a lock (about a microsecond).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coordinator.lag import TAIL

if TYPE_CHECKING:
    from coordinator.run import Run
    from shared.wire import PolicyRef

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
        self._run: RunCollector | None = None

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

    def watch(self, run: Run) -> None:
        """Expose `run`'s counters (the app's lifespan may start again with a new run: it replaces the old)."""
        if self._run is not None:
            self.registry.unregister(self._run)
        self._run = RunCollector(run)
        self.registry.register(self._run)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class RunCollector(Collector):
    """The run's counters and gauges, read from its components when scraped (names kept from the
    hand-written exposition this replaced)."""

    def __init__(self, run: Run) -> None:
        self.run = run

    def describe(self) -> list[Metric]:
        return []  # nothing to check at registration: names are fixed and unique

    def collect(self) -> Iterator[Metric]:
        run = self.run
        data, committer = run.data, run.journal.committer
        for name, help_, count in (
                ("rlfleet_env_steps", "env steps acknowledged", data.env_steps),
                ("rlfleet_episodes", "episodes finished in acknowledged chunks", data.episodes),
                ("rlfleet_chunks", "chunks acknowledged", data.chunks),
                ("rlfleet_duplicate_chunks", "retried chunk reports recognised and counted once",
                 data.duplicate_chunks),
                ("rlfleet_corrupt_chunks", "chunks a learner found unusable", data.corrupt_chunks),
                ("rlfleet_env_errors", "environment exceptions contained by collectors", data.env_errors),
                ("rlfleet_journal_commits", "SQLite transactions since the coordinator started", committer.commits),
                ("rlfleet_member_results", "population member results applied to their generation",
                 run.generations.results_accepted),
                ("rlfleet_member_results_late", "member results for closed generations: acknowledged, never applied",
                 run.generations.late_results),
                ("rlfleet_member_results_duplicate", "repeated member reports recognised and counted once",
                 run.generations.duplicate_results),
                ("rlfleet_members_reoffered", "population members offered again after their lease ran out",
                 run.generations.members_reoffered),
                ("rlfleet_generations_closed", "generations a population-based learner closed",
                 run.generations.generations_closed),
                ("rlfleet_journal_submissions", "journalled mutations since the coordinator started",
                 committer.submissions)):
            yield CounterMetricFamily(name, help_, value=count)
        workers = run.fleet.registry.workers.values()
        gauges: tuple[tuple[str, str, float], ...] = (
                ("rlfleet_env_steps_per_second", "env steps per second over the last few seconds",
                 run.steps_per_second()),
                ("rlfleet_policy_version", "latest published policy version", run.policies.latest_version),
                ("rlfleet_learner_iteration", "learner updates so far", run.learner.iteration),
                ("rlfleet_learner_hooks_failed", "learner hooks switched off after raising",
                 len(run.learner.hooks_failed)),
                ("rlfleet_samples_per_insert", "achieved ratio of sampled to inserted transitions",
                 data.limiter.achieved_ratio()),
                ("rlfleet_run_running", "1 while the run is running", int(run.lifecycle.running)),
                ("rlfleet_workers_flagged", "workers whose chunk reports are refused (corrupt payloads)",
                 sum(run.fleet.flagged(w) for w in workers)))
        for name, help_, value in gauges:
            yield GaugeMetricFamily(name, help_, value=value)
        kinds = Counter(w.kind for w in workers)
        family = GaugeMetricFamily("rlfleet_workers", "live registered workers", labels=["kind"])
        for kind in ("collector", "learner", "evaluator"):
            family.add_metric([kind], kinds[kind])
        yield family
        family = GaugeMetricFamily("rlfleet_buffer_transitions", "transitions in the replay buffer", labels=["buffer"])
        family.add_metric([data.buffer.buffer_id], data.buffer.transitions)
        yield family
        family = GaugeMetricFamily("rlfleet_buffer_capacity_transitions", "replay buffer capacity",
                                   labels=["buffer"])
        family.add_metric([data.buffer.buffer_id], data.buffer.capacity)
        yield family
        yield _lag_histogram(run)


def _lag_histogram(run: Run) -> HistogramMetricFamily:
    """The data plane's lag-at-ingest counts (0..TAIL-1, TAIL+) as a cumulative histogram."""
    lag = run.data.lag
    buckets, total = [], 0
    for k in range(TAIL):
        total += lag.ingest.get(k, 0)
        buckets.append((str(float(k)), total))
    buckets.append(("+Inf", total + lag.ingest.get(TAIL, 0)))
    return HistogramMetricFamily("rlfleet_policy_lag_versions",
                                 "policy versions between each chunk's policy and the latest one, at ingest",
                                 buckets=buckets, sum_value=lag.ingest_sum)


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
