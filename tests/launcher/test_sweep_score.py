"""A trial's score comes from the held-out tests its journal records (never a validation), and its pruner sees the
best validation by each grid point of env steps, once the curve up to it is final."""

from __future__ import annotations

import math
from typing import Any

from rlfleet.launcher.sweep_score import curve, pruner_value, score
from rlfleet.launcher.sweep_spec import HeldOutObjective, TimeToSolve
from rlfleet.launcher.sweep_trial import Outcome, Validation

TEST = HeldOutObjective(kind="test")
BUDGET = {"budget": {"max_env_steps": 60_000, "max_wall_seconds": 300.0}}


def held_out(version: int, mean: float, confirmed: bool = False, env_steps: int = 0,
             wall: float = 0.0) -> dict[str, Any]:
    return {"policy_version": version, "mean": mean, "confirmed": confirmed, "env_steps": env_steps,
            "wall_seconds": wall}


def outcome(state: str, tests: list[dict[str, Any]], best: int | None = None) -> Outcome:
    return Outcome(state, 50_000, 120.0, tests, best, BUDGET)


def test_a_solved_run_scores_the_test_that_confirmed_it() -> None:
    found = score(outcome("solved", [held_out(3, 480.0), held_out(5, 500.0, confirmed=True)], best=6), TEST)
    assert found.value == 500.0 and "v5, which confirmed" in found.note


def test_a_confirming_test_reported_as_the_budget_ran_out_scores_but_is_not_called_a_solve() -> None:
    found = score(outcome("budget_exhausted", [held_out(5, 500.0, confirmed=True)], best=6), TEST)
    assert found.value == 500.0 and "v5, which met the solve rule as the budget ran out" in found.note
    assert score(outcome("budget_exhausted", [held_out(5, 500.0, True, 65_536)]),
                 TimeToSolve(kind="time_to_solve")).value == 60_000  # not solved: the budget


def test_an_unsolved_run_scores_the_test_of_its_best_validated_version() -> None:
    found = score(outcome("budget_exhausted", [held_out(4, 300.0), held_out(7, 410.0), held_out(4, 320.0)], best=4),
                  TEST)
    assert found.value == 320.0 and "v4, the best validated version" in found.note


def test_an_unsolved_run_whose_best_was_not_tested_scores_its_best_test() -> None:
    found = score(outcome("budget_exhausted", [held_out(4, 300.0), held_out(7, 410.0)], best=9), TEST)
    assert found.value == 410.0 and "v9 was not tested" in found.note


def test_a_run_with_no_test_scores_minus_infinity_not_its_validations() -> None:
    found = score(outcome("budget_exhausted", [], best=9), TEST)
    assert found.value == -math.inf and "took no held-out test" in found.note


def test_time_to_solve_is_when_the_confirming_test_reported_or_else_the_budget() -> None:
    solved = outcome("solved", [held_out(3, 480.0, env_steps=20_000), held_out(5, 500.0, True, 28_672, 41.5)])
    assert score(solved, TimeToSolve(kind="time_to_solve")).value == 28_672
    assert score(solved, TimeToSolve(kind="time_to_solve", unit="seconds")).value == 41.5
    unsolved = outcome("budget_exhausted", [held_out(3, 480.0, env_steps=20_000)])
    assert score(unsolved, TimeToSolve(kind="time_to_solve")).value == 60_000
    assert score(unsolved, TimeToSolve(kind="time_to_solve", unit="seconds")).value == 300.0


def test_the_pruner_curve_is_the_best_validation_by_each_grid_point_already_passed() -> None:
    validations = [Validation(4_096, 20.0, 1), Validation(12_288, 150.0, 2), Validation(12_288, 90.0, 3),
                   Validation(16_384, 120.0, 4), Validation(24_576, 300.0, 5)]
    assert curve(validations, 5_000) == {5_000: 20.0, 10_000: 20.0, 15_000: 150.0, 20_000: 150.0}
    assert curve(validations, 5_000, ended=True) == {5_000: 20.0, 10_000: 20.0, 15_000: 150.0, 20_000: 150.0,
                                                      25_000: 300.0}  # the run ended: its last point is final
    assert curve([Validation(4_096, 20.0, 1)], 5_000) == {}  # no validation past 5,000 yet: not final
    assert curve([Validation(6_000, 20.0, 1), Validation(12_000, 50.0, 2)], 5_000) == {10_000: 20.0}  # none by 5,000


def test_a_minimized_study_prunes_on_negated_validations() -> None:
    assert pruner_value(300.0, "maximize") == 300.0
    assert pruner_value(300.0, "minimize") == -300.0
