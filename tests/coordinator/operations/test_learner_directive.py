"""What learners hear with every reply beyond the other workers' directive: the recent training return and the
latest validation and held-out test, which the learner hands its hooks (learner_worker/hooks.py)."""

from __future__ import annotations

from rlfleet.coordinator.run import Run
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import Score
from tests.support.run import chunk, collector, evaluate, holdout, learner, publish, register


def test_learners_hear_the_recent_return_and_the_latest_validation_and_test(run: Run, store: LocalStore) -> None:
    w, t = collector(run)
    lrn = learner(run)
    ev = register(run, "evaluator")
    run.workers.claim(ev)
    before = run.workers.heartbeat(lrn).directive
    assert (before.recent_return_mean, before.latest_validation, before.latest_test) == (None, None, None)

    run.chunks.ingest(chunk(run, w, t, "c1", returns=[10.0, 30.0]))
    publish(run, store, lrn, 1)
    evaluate(run, ev, 1, [475.0, 475.0, 470.0, 480.0])
    heard = run.workers.heartbeat(lrn).directive
    assert heard.env_steps_total == 32 and heard.recent_return_mean == 20.0
    assert heard.latest_validation == Score(policy_version=1, mean=475.0, env_steps=32) and heard.latest_test is None

    holdout(run, ev, 1, [475.0, 485.0] * 50)
    heard = run.workers.heartbeat(lrn).directive
    assert heard.latest_test == Score(policy_version=1, mean=480.0, env_steps=32)

    for other in (w, ev):  # collectors and evaluators get the plain directive, as they always did
        told = run.workers.heartbeat(other).directive
        assert (told.recent_return_mean, told.latest_validation, told.latest_test) == (None, None, None)
