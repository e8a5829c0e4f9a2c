"""The judge of a run with no threshold (env.solve_threshold null): no score nominates a version, the best
validated one is tested once at the end of the budget (any evaluator may run it), and its tests judge nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rlfleet.coordinator.journal.component import Stored
from rlfleet.coordinator.state.judge import Judge
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.wire import EvaluationReport, HoldoutReport
from tests.support.components import JournalFor
from tests.support.configs import make_config

HIGH, LOW = [1e6] * 4, [-1e6] * 4  # small_run_config: 4 validation episodes
EVALUATOR = "evaluator-1-abcdef"


def lone_judge(config: RunConfig) -> Judge:
    return Judge(config.env, config.evaluation)


def no_threshold(run_config: RunConfig) -> Judge:
    return lone_judge(make_config(run_config, env={"solve_threshold": None}))


def judged(judge: Judge, version: int, returns: list[float], alive: Callable[[str], bool] = lambda _: True) -> bool:
    """Whether the validation asked for a held-out test."""
    report = EvaluationReport(worker_id=EVALUATOR, policy_version=version, returns=returns,
                              lengths=[10] * len(returns))
    return judge.judge(report, latest_version=5, env_steps=100, wall_seconds=1.0, iteration=2,
                       alive=alive).test_requested


def held_out(version: int, returns: list[float]) -> HoldoutReport:
    return HoldoutReport(worker_id=EVALUATOR, policy_version=version, returns=returns, lengths=[10] * len(returns))


def test_no_validation_is_nominated_on_its_score(run_config: RunConfig) -> None:
    judge = no_threshold(run_config)
    assert judge.no_threshold and not judged(judge, 1, HIGH)
    assert judge.latest is not None and not judge.latest.solved and judge.under_test is None


def test_an_operator_may_still_ask_for_a_test_and_it_rejects_nothing(run_config: RunConfig) -> None:
    judge = no_threshold(run_config)
    judge.force()
    assert judged(judge, 1, LOW)
    test = judge.test(held_out(1, [5.0] * 100), env_steps=1, wall_seconds=1.0, iteration=1)
    assert not test.confirmed and judge.confirmed is None and judge.rejected == 0


def test_the_end_of_budget_test_is_of_the_best_validated_version_and_any_evaluator_runs_it(
        run_config: RunConfig) -> None:
    judge = no_threshold(run_config)
    assert not judge.request_final()  # nothing validated: nothing to test
    judged(judge, 1, [10.0] * 4)
    judged(judge, 2, [50.0] * 4)
    judged(judge, 3, [20.0] * 4)
    judge.pending.clear()
    assert judge.request_final() and judge.pending.dirty
    assert (judge.final, judge.final_in_flight, judge.under_test) == (2, 2, (2, 50.0, ""))
    # a validation still in flight at the budget neither replaces it nor finds its "evaluator" dead
    assert not judged(judge, 4, HIGH, alive=lambda worker: False)
    assert judge.final_in_flight == 2
    assert judge.test(held_out(2, [48.0] * 100), env_steps=5, wall_seconds=5.0, iteration=5).mean == 48.0
    assert judge.final_in_flight is None and judge.rejected == 0


def test_an_operators_test_in_flight_at_the_budget_comes_first(run_config: RunConfig) -> None:
    judge = no_threshold(run_config)
    judge.force()
    judged(judge, 1, [30.0] * 4)  # its test is in flight
    judged(judge, 2, [60.0] * 4)
    assert judge.request_final() and judge.final == 2
    assert judge.under_test == (1, 30.0, EVALUATOR) and judge.final_in_flight is None


def test_the_end_of_budget_request_survives_a_round_trip(run_config: RunConfig, tmp_path: Path) -> None:
    judge = no_threshold(run_config)
    journal = JournalFor(tmp_path / "journal.sqlite", judge)
    judged(judge, 1, [10.0] * 4)
    judge.request_final()
    journal.commit()
    restored = journal.restore(no_threshold(run_config), now=0.0)
    assert (restored.final, restored.final_in_flight, restored.under_test) == (1, 1, (1, 10.0, ""))


def test_a_journal_from_before_runs_without_a_threshold_has_no_end_of_budget_test(run_config: RunConfig) -> None:
    judge = lone_judge(run_config)
    judge.load_state_dict(Stored({"tests": [], "pending": None, "force_test": False, "test_requests": {}},
                                 {"evaluations": []}), now=0.0)
    assert (judge.final, judge.final_in_flight) == (None, None)
