"""Learning-curve files: losses follow whatever the algorithm reports, one row per learner report."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

from rlfleet.coordinator.observe.metrics import MetricsRecorder
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.wire import EvaluationResult, HoldoutResult
from tests.support.metrics import status, tensorboard_tags
from tests.support.repo import REPO


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


def test_validations_and_tests_are_recorded_with_every_axis_and_plotted(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path, "r")
    recorder = MetricsRecorder(layout)
    evals = [EvaluationResult(policy_version=v, mean=100.0 * v, std=5.0, episodes=10, env_steps=1000 * v,
                              wall_seconds=2.0 * v, iteration=50 * v, solved=v == 5) for v in range(1, 6)]
    tests = [HoldoutResult(policy_version=5, mean=480.0, std=10.0, ci95=(478.0, 482.0), episodes=100,
                           validation_mean=500.0, env_steps=5200, wall_seconds=11.0, iteration=260, confirmed=True)]
    recorder.record(status(260, {"td_loss": 0.1}, 5200))
    recorder.record_evaluations(evals[:3])
    recorder.record_evaluations(evals, tests)
    recorder.finish(status(260, {"td_loss": 0.1}, 5200).model_copy(update={"run_state": "solved"}))
    recorder.close()
    assert [r["iteration"] for r in rows(layout.evaluations_csv)] == ["50", "100", "150", "200", "250"]
    (test,) = rows(layout.tests_csv)
    assert (test["policy_version"], test["iteration"], test["confirmed"]) == ("5", "260", "True")
    assert layout.curve_png.stat().st_size > 10_000


def test_tensorboard_tags_follow_the_common_conventions(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path, "r")
    recorder = MetricsRecorder(layout)
    recorder.record(status(10, {"td_loss": 0.5}, 100).model_copy(update={"recent_return_mean": 20.0}))
    recorder.record_evaluations([EvaluationResult(policy_version=1, mean=30.0, std=1.0, episodes=10, env_steps=100,
                                                  wall_seconds=1.0, solved=False)])
    recorder.close()
    assert {"charts/episodic_return", "charts/SPS", "losses/td_loss", "eval/episodic_return"} <= tensorboard_tags(
        layout.tensorboard)


def test_the_tensorboard_writer_loads_neither_torch_nor_boto3(tmp_path: Path) -> None:
    """A fresh interpreter, as the coordinator is: both stay importable afterwards."""
    script = f"""
import sys
from pathlib import Path
from rlfleet.coordinator.observe.metrics import _summary_writer
writer = _summary_writer(Path({str(tmp_path)!r}))
writer.add_scalar("charts/SPS", 1.0, 0)
writer.close()
print("torch" in sys.modules, "boto3" in sys.modules, end=" ")
import boto3
print(boto3.__name__)
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False boto3"
    assert list(tmp_path.glob("events.out.tfevents.*"))
