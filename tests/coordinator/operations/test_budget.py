"""coordinator.operations.budget: a run with a threshold ends when its budget is used up (unsolved); a run with no
threshold stops training, tests its best policy and then ends, naming the best and the last policy, as a success
for `rlfleet up`."""

from __future__ import annotations

from collections.abc import Callable

from rlfleet.coordinator.run import Run
from rlfleet.launcher.up import succeeded
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.layout import policy_path
from rlfleet.shared.storage.local import LocalStore
from tests.support.configs import make_config
from tests.support.run import FakeClock, chunk, collector, evaluate, holdout, learner, publish, register, settle_files

BUDGET = 96  # three chunks of small_run_config (2 envs x 16 steps)


def no_threshold_run(make_run: Callable[..., Run], run_config: RunConfig) -> Run:
    return make_run(make_config(run_config, env={"solve_threshold": None}, budget={"max_env_steps": BUDGET}))


def validated(run: Run, store: LocalStore) -> tuple[str, str]:
    """Three versions published and validated (v2 the best); (learner, evaluator)."""
    lrn = learner(run)
    ev = register(run, "evaluator")
    run.workers.claim(ev)
    for version, mean in ((1, 10.0), (2, 50.0), (3, 20.0)):
        publish(run, store, lrn, version)
        assert not evaluate(run, ev, version, [mean] * 4).test_requested  # no score nominates a version
    return lrn, ev


def use_up_the_budget(run: Run) -> str:
    w, t = collector(run)
    for i in range(BUDGET // 32):
        run.chunks.ingest(chunk(run, w, t, f"c{i}"))
    run.ctx.flush()  # workers hear of the end of training once it is durable
    assert run.workers.heartbeat(w).directive.run_state == "budget_exhausted"  # the collector's part is done
    return w


def test_a_run_with_no_threshold_tests_its_best_policy_before_it_ends(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore) -> None:
    run = no_threshold_run(make_run, run_config)
    lrn, ev = validated(run, store)
    col = use_up_the_budget(run)
    status = run.status()
    assert (status.run_state, status.no_threshold, status.test_in_flight) == ("running", True, 2)
    assert "testing the best policy" in status.run_message
    assert run.workers.heartbeat(ev).directive.final_test == 2
    assert run.workers.heartbeat(ev).directive.run_state == "running"
    assert run.workers.heartbeat(lrn).directive.run_state == "budget_exhausted"
    assert run.workers.claim(register(run, "collector")).task is None  # a restarted collector finds no work
    run.tick()  # the budget, found used up once, is not checked again
    assert run.status().run_state == "running"
    test = holdout(run, ev, 2, [48.0] * 100)
    assert not test.confirmed
    status = run.status()
    assert status.run_state == "budget_exhausted" and succeeded(status)
    assert "best policy v2 (validation 50.0; held-out test 48.0" in status.run_message
    assert "last policy v3 in policies/v00000003.safetensors" in status.run_message
    assert (status.best_evaluation.policy_version, status.policy_version, status.tests_rejected) == (2, 3, 0)
    assert run.workers.heartbeat(col).directive.run_state == "budget_exhausted"


def test_a_small_returns_test_is_told_in_three_significant_digits(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore) -> None:
    """POPGym's returns lie in [-1, 1]: one decimal would end the run saying "-0.4 ± 0.1, 95% CI -0.4 .. -0.4"."""
    run = no_threshold_run(make_run, run_config)
    _, ev = validated(run, store)
    use_up_the_budget(run)
    holdout(run, ev, 2, [-0.3, -0.5] * 50)
    assert "held-out test -0.4 ± 0.101 over 100 episodes, 95% CI -0.42 .. -0.38)" in run.status().run_message


def test_with_nothing_validated_it_ends_at_once(make_run: Callable[..., Run], run_config: RunConfig,
                                               store: LocalStore) -> None:
    run = no_threshold_run(make_run, run_config)
    publish(run, store, learner(run), 1)
    use_up_the_budget(run)
    status = run.status()
    assert status.run_state == "budget_exhausted" and succeeded(status)
    assert "no policy was validated, so none was tested; last policy v1" in status.run_message


def test_an_operators_test_in_flight_at_the_budget_is_answered_first(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore) -> None:
    run = no_threshold_run(make_run, run_config)
    lrn = learner(run)
    ev = register(run, "evaluator")
    run.workers.claim(ev)
    publish(run, store, lrn, 1)
    run.controls.evaluate_now(test=True)
    assert evaluate(run, ev, 1, [10.0] * 4).test_requested
    publish(run, store, lrn, 2)
    evaluate(run, ev, 2, [30.0] * 4)
    use_up_the_budget(run)
    assert run.workers.heartbeat(ev).directive.final_test is None  # v1's test first
    holdout(run, ev, 1, [9.0] * 100)
    assert run.status().run_state == "running" and run.workers.heartbeat(ev).directive.final_test == 2
    holdout(run, ev, 2, [29.0] * 100)
    assert run.status().run_state == "budget_exhausted" and "best policy v2" in run.status().run_message


def test_a_run_with_a_threshold_still_ends_unsolved_on_its_budget(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore) -> None:
    run = make_run(make_config(run_config, budget={"max_env_steps": BUDGET}))
    validated(run, store)
    use_up_the_budget(run)
    status = run.status()
    assert run.ctx.judge.threshold == 475.0 and not status.no_threshold  # CartPole-v1's registered threshold
    assert status.run_state == "budget_exhausted" and not succeeded(status)
    assert status.run_message == f"env-step budget of {BUDGET} used up"


def test_a_validation_under_way_when_training_stopped_that_finds_a_better_best_gets_the_test(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore) -> None:
    run = no_threshold_run(make_run, run_config)
    lrn, ev = validated(run, store)  # v2 the best
    for version in range(4, 13):  # v4 published as the budget ran out, validated after; v2 drops out of the book
        publish(run, store, lrn, version)
    use_up_the_budget(run)
    assert run.workers.heartbeat(ev).directive.final_test == 2
    evaluate(run, ev, 4, [70.0] * 4)
    run.ctx.flush()
    assert store.size(policy_path(2)) is not None  # replaced as the best, but its asked-for test still reads it
    holdout(run, ev, 2, [48.0] * 100)
    assert run.status().run_state == "running" and run.workers.heartbeat(ev).directive.final_test == 4
    holdout(run, ev, 4, [69.0] * 100)
    status = run.status()
    assert status.run_state == "budget_exhausted" and "best policy v4 (validation 70.0; held-out test 69.0" in \
        status.run_message
    assert status.best_evaluation.policy_version == status.latest_test.policy_version == 4


def test_the_asked_versions_file_outlives_the_book_after_a_better_best_until_its_test_reports(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore) -> None:
    """Seen in a POPGym run: the end-of-budget test was asked of v9, v11's validation (under way when training
    stopped) replaced it as the best, and the learner's last publications pushed v9 out of the book, which
    deleted its file: the evaluator could not read the version it was asked to test and exited, again and again."""
    config = make_config(run_config, env={"solve_threshold": None}, budget={"max_env_steps": BUDGET})
    run = make_run(config, keep_policies=3)
    lrn, ev = validated(run, store)  # v2 the best, still in the book (v1..v3)
    use_up_the_budget(run)
    assert run.workers.heartbeat(ev).directive.final_test == 2
    publish(run, store, lrn, 4)
    evaluate(run, ev, 4, [70.0] * 4)  # the validation under way: v4 is the best now
    for version in range(5, 9):  # the learner's last publications: v2 and v4 leave the book
        publish(run, store, lrn, version)
    settle_files(run)
    assert [p.version for p in run.ctx.policies.versions] == [6, 7, 8]
    assert store.size(policy_path(2)) is not None and store.size(policy_path(4)) is not None
    holdout(run, ev, 2, [48.0] * 100)  # v2's test reported: the run asks for v4's, and v2's file has no keeper
    settle_files(run)
    assert run.workers.heartbeat(ev).directive.final_test == 4 and store.size(policy_path(2)) is None
    holdout(run, ev, 4, [69.0] * 100)
    assert run.status().run_state == "budget_exhausted" and store.size(policy_path(4)) is not None


def candidate_under_test(make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore
                         ) -> tuple[Run, str, str]:
    """A run with a threshold whose v1 validated above it, its held-out test asked for, when the budget runs out;
    (run, learner, evaluator)."""
    run = make_run(make_config(run_config, budget={"max_env_steps": BUDGET}))
    lrn = learner(run)
    ev = register(run, "evaluator")
    run.workers.claim(ev)
    publish(run, store, lrn, 1)
    assert evaluate(run, ev, 1, [490.0] * 4).test_requested
    use_up_the_budget(run)
    status = run.status()
    assert (status.run_state, status.test_in_flight) == ("running", 1)
    assert status.run_message == (f"env-step budget of {BUDGET} used up; waiting for the held-out test of policy v1 "
                                  "under way: if the rule confirms it, the run is solved")
    assert run.workers.heartbeat(lrn).directive.run_state == "budget_exhausted"  # training is over
    assert run.workers.heartbeat(ev).directive.final_test is None  # its own test, not an end-of-budget one
    return run, lrn, ev


def test_a_candidates_test_under_way_when_the_budget_runs_out_still_solves_the_run(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore) -> None:
    run, _, ev = candidate_under_test(make_run, run_config, store)
    assert holdout(run, ev, 1, [500.0] * 100).confirmed
    status = run.status()
    assert status.run_state == "solved" and succeeded(status)
    assert status.run_message.startswith("policy v1 confirmed by a held-out test: 500.0")


def test_a_candidate_the_test_rejects_after_the_budget_ends_the_run_unsolved(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore) -> None:
    run, _, ev = candidate_under_test(make_run, run_config, store)
    assert not holdout(run, ev, 1, [400.0, 500.0] * 50).confirmed
    status = run.status()
    assert status.run_state == "budget_exhausted" and not succeeded(status)
    assert status.run_message.startswith(f"env-step budget of {BUDGET} used up; the held-out test of policy v1 under "
                                         "way when training stopped did not confirm it (450.0 ± 50.3 over 100")


def test_a_run_whose_candidates_evaluator_is_gone_ends_unsolved_instead_of_waiting(
        make_run: Callable[..., Run], run_config: RunConfig, store: LocalStore, clock: FakeClock) -> None:
    run, lrn, _ = candidate_under_test(make_run, run_config, store)
    clock.advance(5)
    run.workers.heartbeat(lrn)
    run.tick()
    assert run.status().run_state == "running"  # its lease has not expired yet
    clock.advance(20)
    run.tick()
    status = run.status()
    assert status.run_state == "budget_exhausted"
    assert status.run_message == (f"env-step budget of {BUDGET} used up; the evaluator of the held-out test under "
                                  "way when training stopped is gone, so the test never reported")

