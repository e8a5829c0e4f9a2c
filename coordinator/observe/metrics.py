"""The run's learning curves: a metrics CSV row and TensorBoard scalars per tick, evaluations as they come.

Written by the coordinator because it sees every counter, loss and evaluation; the workers stay stateless.
Losses are whatever the run's algorithm reports, so they go to their own long-format CSV (one row per
learner report and loss name) and to TensorBoard as `losses/<name>`: no column is tied to one algorithm.
TensorBoard tags follow the widespread conventions (CleanRL's, SB3's): `charts/episodic_return`,
`charts/SPS`, `losses/<name>`, `eval/episodic_return`; every scalar is plotted against env steps (but Elo by
version, against the policy version, and a dataset run's epoch scores, against the epoch). The run's experiment
trackers (W&B, MLflow: coordinator/observe/tracking.py) receive every TensorBoard scalar with its axis, as it is
written, so their curves are TensorBoard's.
"""

from __future__ import annotations

import csv
import logging
import sys
import threading
from pathlib import Path
from typing import Any

from rlfleet.coordinator.observe.tracking import Axis, Scalar, Tracking
from rlfleet.shared.extras import MissingExtra
from rlfleet.shared.storage.layout import BEST_POLICY, RunLayout
from rlfleet.shared.wire import Status

log = logging.getLogger(__name__)

METRIC_COLUMNS = [
    "wall_seconds", "env_steps", "env_steps_per_second", "episodes", "chunks", "recent_return_mean",
    "policy_version", "iteration", "transitions_trained", "samples_per_insert",
    "eval_policy_version", "eval_mean", "eval_std", "buffer_transitions",
]
LOSS_COLUMNS = ["wall_seconds", "env_steps", "iteration", "loss", "value"]


# What tensorboardX imports if it can and the coordinator never uses through it: torch, only to accept tensors
# (the coordinator logs plain floats; torch would cost its process hundreds of MiB), and boto3, only to write
# events to S3 (the event files are in the run directory; boto3 costs ~0.1 s of CPU at the first tick, while
# the workers start).
_UNUSED_BY_TENSORBOARDX = ("torch", "boto3")


def _summary_writer(logdir: Path) -> Any:
    """tensorboardX's SummaryWriter, loaded without the modules above: while it loads, importing any of them
    that is not loaded yet is made to fail (tensorboardX handles that); afterwards imports behave normally."""
    blocked = [name for name in _UNUSED_BY_TENSORBOARDX if name not in sys.modules]  # loaded ones are free
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        from tensorboardX import SummaryWriter
    finally:
        for name in blocked:
            del sys.modules[name]
    return SummaryWriter(str(logdir))


class MetricsRecorder:
    def __init__(self, layout: RunLayout, evaluations_written: int = 0, tests_written: int = 0,
                 tracking: Tracking | None = None) -> None:
        self.layout = layout
        self.tracking = tracking or Tracking()
        self._scalars: list[Scalar] = []  # written to TensorBoard since the trackers were last handed them
        layout.run_dir.mkdir(parents=True, exist_ok=True)
        new = not layout.metrics_csv.exists()
        self._fh = open(layout.metrics_csv, "a", newline="")  # noqa: SIM115 - held open until close()
        self._csv = csv.DictWriter(self._fh, fieldnames=METRIC_COLUMNS)
        if new:
            self._csv.writeheader()
        self._evals_seen = evaluations_written  # a resumed run has written these already
        self._tests_seen = tests_written
        new_losses = not layout.losses_csv.exists()
        self._loss_fh = open(layout.losses_csv, "a", newline="")  # noqa: SIM115 - held open until close()
        self._losses = csv.writer(self._loss_fh)
        if new_losses:
            self._losses.writerow(LOSS_COLUMNS)
        self._loss_iteration = -1
        self._epochs_seen = 0  # a resumed run writes its epochs' TensorBoard scores again: harmless duplicates
        self._writer: Any = None
        self._writer_lock = threading.Lock()

    @property
    def _tb(self) -> Any:
        """The TensorBoard writer, built on first use: importing tensorboardX costs most of a second of CPU, which
        happens in the first tick's thread instead of delaying the coordinator's readiness (and every worker)."""
        with self._writer_lock:
            if self._writer is None:
                self._writer = _summary_writer(self.layout.tensorboard)
            return self._writer

    def _scalar(self, tag: str, value: float, step: int, axis: Axis = "env_steps") -> None:
        """One TensorBoard scalar, kept for the trackers (`_to_trackers` hands them over)."""
        self._tb.add_scalar(tag, value, step)
        self._scalars.append(Scalar(tag, float(value), int(step), axis))

    def _to_trackers(self) -> None:
        scalars, self._scalars = self._scalars, []
        self.tracking.scalars(scalars)

    def record(self, status: Status) -> None:
        ev = status.latest_evaluation
        buffered = sum(b.transitions for b in status.buffers)
        row = {
            "wall_seconds": round(status.wall_seconds, 3),
            "env_steps": status.env_steps,
            "env_steps_per_second": round(status.env_steps_per_second, 1),
            "episodes": status.episodes,
            "chunks": status.chunks,
            "recent_return_mean": status.recent_return_mean,
            "policy_version": status.policy_version,
            "iteration": status.learner.iteration,
            "transitions_trained": status.learner.transitions_trained,
            "samples_per_insert": round(status.learner.samples_per_insert, 3),
            "eval_policy_version": ev.policy_version if ev else None,
            "eval_mean": ev.mean if ev else None,
            "eval_std": ev.std if ev else None,
            "buffer_transitions": buffered,
        }
        self._csv.writerow(row)
        self._fh.flush()
        step = status.env_steps
        self._scalar("charts/SPS", status.env_steps_per_second, step)
        if status.recent_return_mean is not None:
            self._scalar("charts/episodic_return", status.recent_return_mean, step)
        self._scalar("charts/policy_version", status.policy_version, step)
        self._scalar("charts/samples_per_insert", status.learner.samples_per_insert, step)
        self._scalar("charts/buffer_transitions", buffered, step)
        self._scalar("charts/policy_lag", status.policy_lag.ingest_mean, step)
        for name, value in status.learner.losses.items():
            self._scalar(f"losses/{name}", value, step)
        if status.dataset is not None:  # a dataset run has no env steps: its valid-split scores go per epoch
            for score in status.dataset.epoch_scores[self._epochs_seen:]:
                for name, value in score.scores.items():
                    self._scalar(f"dataset/{name}", value, score.epoch, "epoch")
            self._epochs_seen = len(status.dataset.epoch_scores)
        self._to_trackers()
        if status.learner.losses and status.learner.iteration != self._loss_iteration:
            self._loss_iteration = status.learner.iteration  # one row per report, not per tick
            wall = round(status.wall_seconds, 3)
            self._losses.writerows([wall, step, status.learner.iteration, name, value]
                                   for name, value in sorted(status.learner.losses.items()))
            self._loss_fh.flush()

    def record_evaluations(self, evaluations: list, tests: list | None = None) -> None:
        """Append the validations and held-out tests reported since the last call (wall time, env steps and
        learner updates each, so curves can be drawn against any of them)."""
        self._evals_seen = self._append(self.layout.evaluations_csv, evaluations, self._evals_seen, [
            "wall_seconds", "env_steps", "iteration", "policy_version", "mean", "std", "episodes", "elo"],
            "eval/episodic_return")
        self._tests_seen = self._append(self.layout.tests_csv, tests or [], self._tests_seen, [
            "wall_seconds", "env_steps", "iteration", "policy_version", "mean", "std", "episodes", "confirmed"],
            "eval/test_episodic_return")
        self._to_trackers()

    def _append(self, path: Path, results: list, seen: int, columns: list[str], tag: str) -> int:
        new = results[seen:]
        if not new:
            return seen
        first = not path.exists()
        with open(path, "a", newline="") as fh:
            writer = csv.writer(fh)
            if first:
                writer.writerow(columns)
            for result in new:
                row = result.model_dump()
                writer.writerow([round(row[c], 3) if c == "wall_seconds" else row[c] for c in columns])
                self._scalar(tag, result.mean, result.env_steps)
                self._battles(result, tag)
        return len(results)

    def _battles(self, result: Any, tag: str) -> None:
        """Two-player games: win and win-or-draw rates per opponent, and the Elo rating, both against env steps
        and (Elo) against the policy version, which is what a rating curve over versions is read against."""
        prefix = "battle" if tag == "eval/episodic_return" else "battle_test"
        for record in result.battles:
            self._scalar(f"{prefix}/win_rate_vs_{record.opponent}", record.win_rate, result.env_steps)
            self._scalar(f"{prefix}/win_or_draw_rate_vs_{record.opponent}", record.win_or_draw_rate,
                         result.env_steps)
        elo = getattr(result, "elo", None)
        if elo is not None:
            self._scalar("battle/elo", elo, result.env_steps)
            self._scalar("battle/elo_by_version", elo, result.policy_version, "policy_version")

    def finish(self, status: Status) -> None:
        """Write the summary and the learning-curve PNG once the run has ended, and hand them, the curves' files
        and the best policy to the trackers."""
        self.record(status)
        Path(self.layout.summary_json).write_text(status.model_dump_json(indent=2))
        self._tb.flush()
        from rlfleet.coordinator.observe.curves import plot_learning_curve

        try:
            plot_learning_curve(self.layout)
        except MissingExtra as exc:  # the curves stay in metrics.csv and TensorBoard; `rlfleet plot` draws them later
            log.warning("no learning_curve.png: %s", exc)
        if self.tracking.writers:
            layout = self.layout
            self.tracking.finish({"policy": self._best_policy(),
                                  "curves": [layout.metrics_csv, layout.losses_csv, layout.evaluations_csv,
                                             layout.tests_csv, layout.curve_png, Path(layout.summary_json)]},
                                 status.run_state)

    def _best_policy(self) -> list[Path]:
        """The best policy's file for the trackers: in the run directory, or copied there from an object store
        (none where the run validated no policy, or the store cannot be read: said in the log)."""
        layout = self.layout
        if layout.store is None:
            return [layout.best / BEST_POLICY]
        from rlfleet.shared.storage.factory import open_store

        copy = layout.run_dir / "tracking" / BEST_POLICY
        try:
            best = open_store(layout, "best")
            if best.size(BEST_POLICY) is None:
                return []
            copy.parent.mkdir(exist_ok=True)
            copy.write_bytes(best.get(BEST_POLICY))
        except Exception:  # the trackers get the curves anyway
            log.exception("the best policy could not be read from %s for the trackers", layout.store)
            return []
        return [copy]

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._fh.close()
        self._loss_fh.close()
