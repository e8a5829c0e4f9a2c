"""The progress line of `rlfleet up`: what it says of the held-out tests, from a real run's status."""

from __future__ import annotations

from coordinator.run import Run
from launcher.progress import describe
from shared.config.run_config import RunConfig
from shared.storage.local import LocalStore
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
