"""The progress line of `rlfleet up`: what it says of the held-out tests, from a real run's status, and how a test
reads where the run has no threshold (a score, no verdict)."""

from __future__ import annotations

import re

from rlfleet.coordinator.api.examples import STATUS, TESTED
from rlfleet.coordinator.run import Run
from rlfleet.launcher.progress import describe
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import TrackerStatus
from tests.support.run import FakeClock, evaluate, holdout, learner, publish, register


def test_the_latest_test_shows_its_interval_and_the_bound_that_decided_it(run_config: RunConfig,
                                                                         store: LocalStore) -> None:
    run = Run(run_config, store, clock=FakeClock(), sample_wait_seconds=0)
    publish(run, store, learner(run), 1)
    ev = register(run, "evaluator")
    run.workers.claim(ev)
    assert evaluate(run, ev, 1, [480.0] * 4).test_requested  # small_run_config: 4 episodes, threshold 475
    holdout(run, ev, 1, [430.0, 530.0] * 50)  # mean 480, but a re-test could well fall short
    assert "tests: test v1 480.0 [470.0, 490.0], re-test bound 468.2 rejected, 1 rejected" in describe(run.status())


def test_a_test_reads_as_its_verdict_or_as_a_score_without_a_threshold() -> None:
    confirmed = STATUS.model_copy(update={"latest_test": TESTED.model_copy(update={"confirmed": True})})
    assert re.search(r"test v3 498\.5 \[[^]]+\][^|]* confirmed", describe(confirmed))
    untested = TESTED.model_copy(update={"confirmed": False})
    assert re.search(r"test v3 498\.5 \[[^]]+\][^|]* rejected", describe(STATUS.model_copy(
        update={"latest_test": untested})))
    scored = STATUS.model_copy(update={"latest_test": untested, "no_threshold": True, "test_in_flight": 3})
    assert re.search(r"tests: testing v3, test v3 498\.5 \[[^]]+\][^|]* \(no threshold\)", describe(scored))


def test_returns_within_one_keep_three_significant_digits() -> None:
    """POPGym's returns lie in [-1, 1]: at one decimal a run's every figure would read -0.4 or -0.5."""
    small = TESTED.model_copy(update={"mean": -0.41416, "ci95": (-0.43473, -0.39360), "bound": -0.43850})
    evaluated = STATUS.latest_evaluation.model_copy(update={"mean": -0.45139})
    best = STATUS.best_evaluation.model_copy(update={"mean": -0.37083})
    line = describe(STATUS.model_copy(update={"latest_test": small, "no_threshold": True, "recent_return_mean": -0.4389,
                                              "latest_evaluation": evaluated, "best_evaluation": best}))
    assert "train return -0.439 | eval -0.451 (best -0.371)" in line
    assert "test v3 -0.414 [-0.435, -0.394], re-test bound -0.439 (no threshold)" in line


def test_a_failed_or_lagging_tracker_shows_on_the_line_and_a_healthy_one_does_not() -> None:
    healthy = TrackerStatus(name="wandb", state="running", written=120, dropped=0)
    failed = TrackerStatus(name="mlflow", state="failed", error="OperationalError: disk full", written=3, dropped=9)
    lagging = healthy.model_copy(update={"dropped": 1200})
    assert "tracker" not in describe(STATUS.model_copy(update={"trackers": [healthy]}))
    line = describe(STATUS.model_copy(update={"trackers": [lagging, failed]}))
    assert line.endswith(" | tracker wandb dropped 1,200 scalars | tracker mlflow failed: OperationalError: disk full")
