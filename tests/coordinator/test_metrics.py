"""Learning-curve files: losses follow whatever the algorithm reports, one row per learner report."""

from __future__ import annotations

import csv
from pathlib import Path

from coordinator.metrics import MetricsRecorder
from shared.layout import RunLayout
from shared.wire import LearnerStatus, Status


def status(iteration: int, losses: dict[str, float], env_steps: int) -> Status:
    return Status.model_construct(
        wall_seconds=1.5, env_steps=env_steps, env_steps_per_second=10.0, episodes=3, chunks=2,
        recent_return_mean=None, policy_version=1, latest_evaluation=None, buffers=[],
        learner=LearnerStatus(iteration=iteration, transitions_trained=64 * iteration, losses=losses,
                              samples_per_insert=8.0))


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_losses_of_any_algorithm_are_recorded_once_per_report(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path, "r")
    recorder = MetricsRecorder(layout)
    recorder.record(status(0, {}, 0))  # before the first report: nothing to write
    recorder.record(status(10, {"critic_loss": 0.5, "alpha": 0.2}, 100))
    recorder.record(status(10, {"critic_loss": 0.5, "alpha": 0.2}, 120))  # the same report seen again
    recorder.record(status(20, {"critic_loss": 0.25, "alpha": 0.1}, 200))
    recorder.close()
    assert [(r["iteration"], r["loss"], r["value"]) for r in rows(layout.losses_csv)] == [
        ("10", "alpha", "0.2"), ("10", "critic_loss", "0.5"), ("20", "alpha", "0.1"), ("20", "critic_loss", "0.25")]
    assert len(rows(layout.metrics_csv)) == 4 and "critic_loss" not in rows(layout.metrics_csv)[0]
    again = MetricsRecorder(layout)  # a resumed coordinator appends, without a second header
    again.record(status(30, {"policy_loss": 1.0}, 300))
    again.close()
    assert rows(layout.losses_csv)[-1]["loss"] == "policy_loss" and len(rows(layout.losses_csv)) == 5
