"""The run's counters and gauges for Prometheus, read from its components when scraped: the hot paths pay
nothing for them (coordinator/telemetry.py observes only what exists nowhere else)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from rlfleet.coordinator.operations.context import RunContext
from rlfleet.coordinator.operations.workload import every_counter
from rlfleet.coordinator.state.lag import TAIL
from rlfleet.shared.wire import TrackerStatus


class RunCollector(Collector):
    """The run's counters and gauges, read from its components when scraped (names kept from the
    hand-written exposition this replaced)."""

    def __init__(self, ctx: RunContext, steps_per_second: Callable[[], float],
                 trackers: Callable[[], list[TrackerStatus]] = list) -> None:
        self.ctx = ctx
        self.steps_per_second = steps_per_second
        self.trackers = trackers

    def describe(self) -> list[Metric]:
        return []  # nothing to check at registration: names are fixed and unique

    def collect(self) -> Iterator[Metric]:
        run = self.ctx
        data, committer = run.data, run.journal.committer
        for name, help_, count in (
                ("rlfleet_env_steps", "env steps acknowledged", data.env_steps),
                ("rlfleet_episodes", "episodes finished in acknowledged chunks", data.episodes),
                ("rlfleet_chunks", "chunks acknowledged", data.chunks),
                ("rlfleet_duplicate_chunks", "retried chunk reports recognised and counted once",
                 data.duplicate_chunks),
                ("rlfleet_corrupt_chunks", "chunks a learner found unusable", data.corrupt_chunks),
                ("rlfleet_env_errors", "environment exceptions contained by collectors", data.env_errors),
                ("rlfleet_payload_bytes", "payload bytes of acknowledged chunks", data.payload_bytes),
                ("rlfleet_checkpoint_loads", "checkpoints loaded from other runs", len(run.control.loads)),
                ("rlfleet_checkpoint_load_refusals", "checkpoint loads refused as incompatible with this run",
                 run.control.load_refusals),
                ("rlfleet_journal_commits", "SQLite transactions since the coordinator started", committer.commits),
                ("rlfleet_journal_submissions", "journalled mutations since the coordinator started",
                 committer.submissions)):
            yield CounterMetricFamily(name, help_, value=count)
        counts = run.workload.counts()
        for name, help_ in every_counter():  # every kind's counters in every run: dashboards keep their series
            yield CounterMetricFamily(name, help_, value=counts.get(name, 0))
        workers = run.fleet.registry.workers.values()
        gauges: tuple[tuple[str, str, float], ...] = (
                ("rlfleet_env_steps_per_second", "env steps per second over the last few seconds",
                 self.steps_per_second()),
                ("rlfleet_policy_version", "latest published policy version", run.policies.latest_version),
                ("rlfleet_payload_bytes_per_env_step", "mean payload bytes per acknowledged env step (NaN before "
                 "the first chunk)", data.bytes_per_env_step if data.bytes_per_env_step is not None else float("nan")),
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
        yield from _tracker_metrics(self.trackers())


def _tracker_metrics(trackers: list[TrackerStatus]) -> Iterator[Metric]:
    """Per tracker of the run's `tracking` section: whether it failed, and its scalars written and dropped."""
    failed = GaugeMetricFamily("rlfleet_tracker_failed", "1 once an experiment tracker raised and was switched "
                                                         "off (the run goes on without it)", labels=["tracker"])
    written = CounterMetricFamily("rlfleet_tracker_scalars_written", "scalars an experiment tracker wrote",
                                  labels=["tracker"])
    dropped = CounterMetricFamily("rlfleet_tracker_scalars_dropped", "scalars an experiment tracker dropped: "
                                  "its queue was full, or it had failed", labels=["tracker"])
    for tracker in trackers:
        failed.add_metric([tracker.name], int(tracker.state == "failed"))
        written.add_metric([tracker.name], tracker.written)
        dropped.add_metric([tracker.name], tracker.dropped)
    yield from (failed, written, dropped)


def _lag_histogram(run: RunContext) -> HistogramMetricFamily:
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
