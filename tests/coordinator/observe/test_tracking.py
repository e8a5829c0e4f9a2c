"""The run's trackers never stall or end the coordinator: a tracker that cannot write is switched off, shown in
status and metrics and logged once, while the run's other trackers go on; a stuck one costs the caller nothing
(its scalars beyond the queue are dropped and counted) and shutdown leaves it behind after a bounded wait.
The metrics recorder hands the trackers exactly the scalars it writes to TensorBoard, each with its x-axis."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rlfleet.coordinator.observe.metrics import MetricsRecorder
from rlfleet.coordinator.observe.mlflow_tracker import flat_params
from rlfleet.coordinator.observe.scrape import _tracker_metrics
from rlfleet.coordinator.observe.tracking import Scalar, Tracker, Tracking, _Writer
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.wire import BattleRecord, EvaluationResult, HoldoutResult
from tests.support.metrics import status, tensorboard_tags


class Recording:
    """A tracker that keeps what it is given (the Tracker protocol), optionally held up until `release` is set."""

    def __init__(self, release: threading.Event | None = None) -> None:
        self.release = release
        self.params: dict[str, Any] = {}
        self.scalars: list[Scalar] = []
        self.finished: tuple[dict[str, list[Path]], str] | None = None

    def start(self, params: dict[str, Any]) -> None:
        self.params = params

    def log(self, scalars: list[Scalar]) -> None:
        if self.release is not None:
            self.release.wait()
        self.scalars += scalars

    def finish(self, artifacts: dict[str, list[Path]], run_state: str) -> None:
        self.finished = (artifacts, run_state)


def tracking_of(tracker: Tracker, capacity: int = 10_000) -> Tracking:
    return Tracking([_Writer("wandb", lambda: tracker, capacity)])


def test_a_tracker_that_cannot_write_is_switched_off_shown_and_logged_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Real MLflow, given a store it cannot create (its directory is a file); the other tracker goes on."""
    (tmp_path / "not-a-dir").write_text("")
    config = RunConfig.model_validate({"name": "r", "tracking": {"mlflow": {
        "tracking_uri": f"sqlite:///{tmp_path / 'not-a-dir' / 'mlflow.db'}"}}})
    layout = RunLayout(tmp_path, "r")
    layout.run_dir.mkdir(parents=True)
    tracking = Tracking.of(config, layout)
    recording = Recording()
    tracking.writers.append(_Writer("wandb", lambda: recording, 100))
    tracking.writers[-1].thread.start()
    with caplog.at_level(logging.ERROR, "rlfleet.coordinator.tracking"):
        tracking.start(config)
        for step in range(1, 4):
            tracking.scalars([Scalar("charts/SPS", 10.0 * step, 100 * step)])
        deadline = time.monotonic() + 60
        while tracking.writers[0].state != "failed" and time.monotonic() < deadline:
            time.sleep(0.05)
        tracking.scalars([Scalar("charts/SPS", 40.0, 400)])
        started = time.monotonic()
        tracking.close(seconds=30)
        assert time.monotonic() - started < 10  # the failed writer is gone: nothing to wait for
    mlflow, wandb = tracking.status()
    assert (mlflow.name, mlflow.state, mlflow.written) == ("mlflow", "failed", 0)
    assert mlflow.error is not None and mlflow.error.startswith("FileExistsError: ") and "not-a-dir" in mlflow.error
    assert mlflow.dropped >= 1  # what came after it failed (what it held when it did was discarded with it)
    assert (wandb.state, wandb.written, wandb.dropped) == ("running", 4, 0)
    assert [s.value for s in recording.scalars] == [10.0, 20.0, 30.0, 40.0]
    (logged,) = [r for r in caplog.records if r.name == "rlfleet.coordinator.tracking"]
    assert logged.getMessage().startswith("tracker mlflow failed and is switched off for the rest of this run")
    assert logged.exc_info is not None
    failed, _, dropped = _tracker_metrics(tracking.status())
    assert {s.labels["tracker"]: s.value for s in failed.samples} == {"mlflow": 1, "wandb": 0}
    assert {s.labels["tracker"]: s.value for s in dropped.samples if s.name.endswith("_total")}["mlflow"] >= 1


def test_a_stuck_tracker_costs_the_caller_nothing_and_shutdown_leaves_it_behind(
        caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()
    tracker = Recording(release)
    tracking = tracking_of(tracker, capacity=100)
    tracking.scalars([Scalar("charts/SPS", 1.0, 0), Scalar("charts/policy_version", 1.0, 0)])
    deadline = time.monotonic() + 10
    while not tracking.writers[0].queue.empty() and time.monotonic() < deadline:
        time.sleep(0.01)  # until the writer holds it, stuck in its library
    started = time.monotonic()
    for step in range(1, 501):  # 100 wait in the queue, the rest are dropped
        tracking.scalars([Scalar("charts/SPS", 1.0, step), Scalar("charts/policy_version", 1.0, step)])
    assert time.monotonic() - started < 1.0
    (state,) = tracking.status()
    assert state.dropped == 2 * (500 - 100) and state.written == 0
    with caplog.at_level(logging.ERROR, "rlfleet.coordinator.tracking"):
        started = time.monotonic()
        tracking.close(seconds=0.2)
        assert time.monotonic() - started < 2.0
    assert "tracker wandb did not finish writing within 0 s of shutdown; left behind" in caplog.text
    release.set()  # the library comes back: what was queued is written after all
    tracking.writers[0].thread.join(10)
    assert len(tracker.scalars) == 2 * 101


def test_finish_hands_over_existing_artifacts_once_and_later_scalars_are_ignored(tmp_path: Path) -> None:
    tracker = Recording()
    tracking = tracking_of(tracker)
    (tmp_path / "metrics.csv").write_text("x\n")
    tracking.finish({"curves": [tmp_path / "metrics.csv", tmp_path / "learning_curve.png"], "policy": []}, "solved")
    tracking.finish({"curves": [], "policy": []}, "stopped")  # the shutdown after the end: no second finish
    tracking.scalars([Scalar("charts/SPS", 1.0, 1)])
    tracking.close()
    assert tracker.finished == ({"curves": [tmp_path / "metrics.csv"], "policy": []}, "solved")
    assert tracker.scalars == [] and tracking.status()[0].state == "finished"


def test_the_recorder_hands_the_trackers_every_tensorboard_scalar_with_its_axis(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path, "r")
    tracker = Recording()
    tracking = tracking_of(tracker)
    recorder = MetricsRecorder(layout, tracking=tracking)
    recorder.record(status(10, {"td_loss": 0.5}, 1000).model_copy(update={"recent_return_mean": 21.0}))
    evals = [EvaluationResult(policy_version=2, mean=50.0, std=1.0, episodes=4, env_steps=900, wall_seconds=1.0,
                              solved=False, elo=35.0,
                              battles=[BattleRecord.of("random", [1.0, 1.0, 1.0, 0.0])])]
    tests = [HoldoutResult(policy_version=2, mean=48.0, std=2.0, ci95=(46.0, 50.0), episodes=4,
                           validation_mean=50.0, env_steps=950, wall_seconds=2.0, confirmed=False)]
    recorder.record_evaluations(evals, tests)
    recorder.finish(status(20, {"td_loss": 0.25}, 2000).model_copy(update={"run_state": "budget_exhausted"}))
    recorder.close()
    tracking.close()
    by_tag: dict[str, list[tuple[str, int, float]]] = {}
    for s in tracker.scalars:
        by_tag.setdefault(s.tag, []).append((s.axis, s.step, s.value))
    assert set(by_tag) == tensorboard_tags(layout.tensorboard)
    assert by_tag["charts/episodic_return"] == [("env_steps", 1000, 21.0)]
    assert by_tag["losses/td_loss"] == [("env_steps", 1000, 0.5), ("env_steps", 2000, 0.25)]
    assert by_tag["eval/episodic_return"] == [("env_steps", 900, 50.0)]
    assert by_tag["eval/test_episodic_return"] == [("env_steps", 950, 48.0)]
    assert by_tag["battle/elo_by_version"] == [("policy_version", 2, 35.0)]
    assert by_tag["battle/win_rate_vs_random"] == [("env_steps", 900, 0.75)]
    artifacts, run_state = tracker.finished or ({}, "")
    assert run_state == "budget_exhausted" and artifacts["policy"] == []  # no best policy in this run
    assert {p.name for p in artifacts["curves"]} == {"metrics.csv", "losses.csv", "evaluations.csv", "tests.csv",
                                                      "learning_curve.png", "summary.json"}


def test_mlflow_params_are_the_configs_leaves_by_dotted_path() -> None:
    params = dict(flat_params(RunConfig.model_validate({"name": "r", "env": {"kwargs": {"odd key!": [1, 2]}}})
                              .model_dump(mode="json")))
    assert params["name"] == "r" and params["algo.name"] == "dqn" and params["algo.learning_rate"] == "0.0023"
    assert params["env.kwargs.odd key_"] == "[1, 2]" and params["self_play"] == "null"
    assert params["algo.net.hidden"] == "[256, 256]"


def test_values_of_one_tag_at_one_step_all_reach_wandb_and_mlflow_in_order(tmp_path: Path) -> None:
    """Three versions validated at the same env-step count: W&B once merged them into one history row (keeping
    only the last), and MLflow's history, ordered by timestamp, could reorder values logged in the same millisecond."""
    pytest.importorskip("wandb")
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from rlfleet.coordinator.observe.mlflow_tracker import MlflowTracker
    from rlfleet.coordinator.observe.wandb_tracker import WandbTracker
    from rlfleet.shared.config.tracking import MlflowConfig, WandbConfig
    from tests.support.wandb_offline import read_offline_run

    layout = RunLayout(tmp_path, "same-step")
    layout.run_dir.mkdir(parents=True)
    scalars = [Scalar("eval/episodic_return", value, 4224) for value in (9.25, 9.75, 8.5)]
    scalars.append(Scalar("charts/SPS", 100.0, 4224))
    wandb, mlflow = WandbTracker(WandbConfig(project="p"), layout), MlflowTracker(MlflowConfig(), layout)
    for tracker in (wandb, mlflow):
        tracker.start({})
        tracker.log(scalars)
        tracker.finish({}, "stopped")
    assert read_offline_run(layout.run_dir).curve("eval/episodic_return") == [(4224, 9.25), (4224, 9.75),
                                                                               (4224, 8.5)]
    history = MlflowClient(mlflow.uri).get_metric_history(mlflow.run_id, "eval/episodic_return")
    assert [(m.step, m.value) for m in history] == [(4224, 9.25), (4224, 9.75), (4224, 8.5)]
