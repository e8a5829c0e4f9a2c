"""The run's experiment trackers (the config's `tracking` section): each behind a bounded queue and a writer
thread of its own, so that no tracker can stall or end the coordinator.

The coordinator feeds them what it writes to TensorBoard, scalar for scalar with the same x-axes
(coordinator/observe/metrics.py hands every scalar to `Tracking.scalars` as it writes it), the resolved run config
as parameters when it starts, and the run's curves and best policy as artifacts when the run ends.

A tracker is someone else's library doing I/O, perhaps over a network: it may be slow, hang or raise. So:

* Nothing the coordinator calls here blocks. Each tracker has its own queue (`tracking.queue_events` scalars)
  drained by its own daemon thread, which imports the library, opens the tracker's run and writes; a full queue
  drops new scalars and counts them. One slow tracker does not hold up the other.
* A tracker that raises is switched off: its traceback is logged once, at ERROR, its state becomes `failed` with
  the error in status (`trackers`) and in Prometheus (`rlfleet_tracker_failed`), and whatever reaches it
  afterwards is dropped and counted. The run goes on, and so does every other tracker.
* At shutdown each writer gets a bounded time to finish (`close`); a writer still stuck in its library after
  that is left behind (a daemon thread) and named in the log, rather than hold the coordinator's exit.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.wire import TrackerStatus

log = logging.getLogger("rlfleet.coordinator.tracking")

Axis = Literal["env_steps", "policy_version", "epoch"]
TrackerName = Literal["wandb", "mlflow"]
CLOSE_SECONDS = 30.0  # how long shutdown waits for each tracker to write what it holds and close its run


@dataclass(frozen=True)
class Scalar:
    """One point of a curve: `tag` (TensorBoard's, e.g. charts/episodic_return) at `step` of `axis`."""

    tag: str
    value: float
    step: int
    axis: Axis = "env_steps"


class Tracker(Protocol):
    """One tracker's run, opened by `start` and closed by `finish`; called from its writer thread only."""

    def start(self, params: dict[str, Any]) -> None:
        """Open (or continue) the tracker's run and record the resolved config as its parameters."""

    def log(self, scalars: list[Scalar]) -> None:
        """Record scalars, each against its own axis."""

    def finish(self, artifacts: dict[str, list[Path]], run_state: str) -> None:
        """Attach the artifacts (files, by group: `policy`, `curves`) and close the run as ended in `run_state`."""


class _Writer:
    """One tracker: its queue, its thread, and what status says about it."""

    def __init__(self, name: TrackerName, build: Callable[[], Tracker], capacity: int) -> None:
        self.name = name
        self.build = build
        self.queue: queue.Queue[Callable[[Tracker], None] | None] = queue.Queue(maxsize=capacity)
        self.state: Literal["starting", "running", "finished", "failed"] = "starting"
        self.error: str | None = None
        self.written = self.dropped = 0
        self.thread = threading.Thread(target=self._run, name=f"tracker-{name}", daemon=True)

    def submit(self, work: Callable[[Tracker], None], scalars: int = 0) -> None:
        """Queue `work` (carrying `scalars` scalars) without waiting; dropped and counted when the queue is full
        or the tracker has failed."""
        if self.state == "failed":
            self.dropped += scalars
            return
        try:
            self.queue.put_nowait(work)
        except queue.Full:
            self.dropped += scalars

    def _run(self) -> None:
        try:
            tracker = self.build()
            while (work := self.queue.get()) is not None:
                work(tracker)
                if self.state == "starting":
                    self.state = "running"
        except Exception as exc:  # someone else's library: contained, see the module doc
            self.state, self.error = "failed", f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:1000]
            log.exception("tracker %s failed and is switched off for the rest of this run (the run goes on): %s",
                          self.name, self.error)
            self._discard()

    def _discard(self) -> None:
        """After a failure: empty the queue, so that `submit` never finds it full for a reason that is gone."""
        while True:
            try:
                self.queue.get_nowait()
            except queue.Empty:
                return

    def status(self) -> TrackerStatus:
        return TrackerStatus(name=self.name, state=self.state, error=self.error, written=self.written,
                             dropped=self.dropped)


class Tracking:
    """The run's trackers. Every method returns at once: the work happens in each tracker's writer thread."""

    def __init__(self, writers: Iterable[_Writer] = ()) -> None:
        self.writers = list(writers)
        self._finished = False
        for writer in self.writers:
            writer.thread.start()

    @classmethod
    def of(cls, config: RunConfig, layout: RunLayout) -> Tracking:
        """The trackers `config.tracking` turns on, writing into `layout`'s run directory; each library is
        imported in its tracker's thread, so that starting the coordinator waits for none of them."""
        tracking = config.tracking
        writers = []
        if tracking.wandb is not None:
            wandb = tracking.wandb

            def build_wandb() -> Tracker:
                from rlfleet.coordinator.observe.wandb_tracker import WandbTracker

                return WandbTracker(wandb, layout)

            writers.append(_Writer("wandb", build_wandb, tracking.queue_events))
        if tracking.mlflow is not None:
            mlflow = tracking.mlflow

            def build_mlflow() -> Tracker:
                from rlfleet.coordinator.observe.mlflow_tracker import MlflowTracker

                return MlflowTracker(mlflow, layout)

            writers.append(_Writer("mlflow", build_mlflow, tracking.queue_events))
        return cls(writers)

    def start(self, config: RunConfig) -> None:
        """Open each tracker's run with the resolved config as its parameters."""
        params = config.model_dump(mode="json")
        for writer in self.writers:
            writer.submit(lambda tracker: tracker.start(params))

    def scalars(self, scalars: list[Scalar]) -> None:
        """Record the scalars one tick (or one batch of evaluations) wrote to TensorBoard."""
        if not scalars or self._finished:
            return
        for writer in self.writers:
            writer.submit(functools.partial(self._log, writer, scalars=scalars), len(scalars))

    @staticmethod
    def _log(writer: _Writer, tracker: Tracker, *, scalars: list[Scalar]) -> None:
        tracker.log(scalars)
        writer.written += len(scalars)

    def finish(self, artifacts: dict[str, list[Path]], run_state: str) -> None:
        """The run has ended: attach `artifacts` (by group; the files that exist when the writer gets to them) and
        close each tracker's run. Only the first call counts: a coordinator that keeps serving an ended run, and
        then shuts down, finishes once."""
        if self._finished:
            return
        self._finished = True
        for writer in self.writers:
            writer.submit(functools.partial(self._finish, writer, artifacts=artifacts, run_state=run_state))

    @staticmethod
    def _finish(writer: _Writer, tracker: Tracker, *, artifacts: dict[str, list[Path]], run_state: str) -> None:
        tracker.finish({group: [path for path in paths if path.is_file()] for group, paths in artifacts.items()},
                       run_state)
        writer.state = "finished"

    def close(self, seconds: float = CLOSE_SECONDS) -> None:
        """Let each writer write what it holds and stop, waiting at most `seconds` for each."""
        for writer in self.writers:
            if not writer.thread.is_alive():
                continue  # failed, and gone
            with contextlib.suppress(queue.Full):  # stuck: the join below times out and says so
                writer.queue.put(None, timeout=seconds)
        for writer in self.writers:
            writer.thread.join(seconds)
            if writer.thread.is_alive():
                log.error("tracker %s did not finish writing within %.0f s of shutdown; left behind (its library "
                          "is stuck): what it held may be missing from it", writer.name, seconds)

    def status(self) -> list[TrackerStatus]:
        return [writer.status() for writer in self.writers]
