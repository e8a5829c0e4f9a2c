"""Held-out confirmation: validations nominate, one test at a time decides, rejections are counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.errors import Conflict, Invalid
from coordinator.journal import Journal
from coordinator.run import Run
from shared.config import RunConfig
from shared.store import LocalStore
from tests.coordinator.test_run import FakeClock, evaluate, holdout, learner, publish, register

PASS, FAIL = [480.0] * 4, [400.0] * 100  # small_run_config: 4 validation episodes, threshold 475


def setup(run: Run, store: LocalStore, versions: int = 3) -> str:
    lrn = learner(run)
    for version in range(1, versions + 1):
        publish(run, store, lrn, version)
    ev = register(run, "evaluator")
    run.claim(ev)
    return ev


def test_a_rejected_candidate_keeps_the_run_going_and_only_a_better_one_is_tested_next(
        run: Run, store: LocalStore) -> None:
    ev = setup(run, store)
    assert evaluate(run, ev, 1, PASS).test_requested
    rejected = holdout(run, ev, 1, FAIL)
    assert not rejected.confirmed and rejected.validation_mean == 480.0
    assert run.lifecycle.state == "running" and run.status().tests_rejected == 1
    # measured by its test (400), the rejected candidate is beaten by any passing validation: a lucky
    # validation cannot lock later candidates out
    assert evaluate(run, ev, 2, PASS).test_requested
    assert not holdout(run, ev, 2, [470.0] * 100).confirmed
    assert evaluate(run, ev, 3, [490.0] * 4).test_requested
    assert holdout(run, ev, 3, [476.0] * 100).confirmed
    status = run.status()
    assert status.run_state == "solved" and status.confirmed_by is not None
    assert (status.confirmed_by.policy_version, status.tests_rejected) == (3, 2)


def test_at_most_one_test_is_in_flight(run: Run, store: LocalStore) -> None:
    ev = setup(run, store)
    assert evaluate(run, ev, 1, PASS).test_requested
    assert not evaluate(run, ev, 2, [499.0] * 4).test_requested  # better, but v1's test is still running
    assert run.status().test_in_flight == 1
    with pytest.raises(Conflict, match="no held-out test of policy v2 was requested"):
        holdout(run, ev, 2, [500.0] * 100)


def test_a_dead_evaluator_does_not_block_tests_forever(run: Run, store: LocalStore, clock: FakeClock) -> None:
    ev = setup(run, store)
    assert evaluate(run, ev, 1, PASS).test_requested
    clock.advance(run.fleet.lease_seconds + 1)
    run.tick()  # its lease expires mid-test
    successor = register(run, "evaluator")
    run.claim(successor)
    assert evaluate(run, successor, 1, PASS).test_requested


def test_a_test_must_hold_test_episodes_and_a_retry_counts_once(run: Run, store: LocalStore) -> None:
    ev = setup(run, store)
    evaluate(run, ev, 1, PASS)
    with pytest.raises(Invalid, match="evaluation.test_episodes=100"):
        holdout(run, ev, 1, [500.0] * 10)
    first = holdout(run, ev, 1, FAIL, request_id="t-1")
    assert holdout(run, ev, 1, FAIL, request_id="t-1") == first
    assert run.status().tests_rejected == 1


def test_tests_and_the_pending_request_survive_a_restart(tmp_path: Path, run_config: RunConfig,
                                                         store: LocalStore) -> None:
    clock = FakeClock()
    run = Run(run_config, store, clock=clock, sample_wait_seconds=0, journal=Journal(tmp_path / "j.sqlite"))
    ev = setup(run, store)
    evaluate(run, ev, 1, PASS)
    holdout(run, ev, 1, FAIL, request_id="t-1")
    evaluate(run, ev, 2, [490.0] * 4)
    run.flush()
    run.journal.close()  # the process dies here
    again = Run(run_config, store, clock=clock, sample_wait_seconds=0, journal=Journal(tmp_path / "j.sqlite"))
    status = again.status()
    assert status.tests_rejected == 1 and status.test_in_flight == 2 and status.latest_test is not None
    assert again.judge.retried_test("t-1") == status.latest_test
