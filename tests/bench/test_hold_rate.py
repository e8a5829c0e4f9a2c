"""bench/hold_rate.py's reading of a run's test history: each rule's candidate, and the summary per rule."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_hold_rate", REPO / "bench" / "hold_rate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def held_out(version: int, mean: float, confirmed: bool, seconds: float, rule: str = "retest_lower_bound_95"
             ) -> dict[str, Any]:
    """A held-out test as the journal keeps it (HoldoutResult JSON), with the fields the script reads."""
    return {"policy_version": version, "mean": mean, "confirmed": confirmed, "rule": rule, "wall_seconds": seconds,
            "env_steps": version * 1000, "episodes": 100}


def test_the_old_rule_takes_the_first_test_mean_at_the_threshold_and_the_new_its_confirmation() -> None:
    bench = _load_bench()
    history = [held_out(3, 470.0, False, 10.0), held_out(5, 479.4, False, 14.0), held_out(8, 500.0, True, 16.0)]
    found = bench.candidates(history, 475.0)
    assert found["retest_lower_bound_95"]["policy_version"] == 8 and found["mean_at_threshold"]["policy_version"] == 5
    # a run that ended on its budget: the old rule had a solve, the new one none
    assert bench.candidates(history[:2], 475.0)["retest_lower_bound_95"] is None
    # a journal from before the rule was recorded confirms nothing under the new rule's name
    assert bench.candidates([held_out(2, 480.0, True, 5.0, rule="mean_at_threshold")], 475.0)[
        "retest_lower_bound_95"] is None


def test_the_summary_counts_holds_and_ranks_a_run_without_a_solve_last() -> None:
    bench = _load_bench()

    def solve(seconds: float, holds: bool) -> dict[str, Any]:
        return {"wall_seconds": seconds, "env_steps": 1000, "retest": {"holds": holds}}

    rows = [{"rules": {"retest_lower_bound_95": solve(20.0, True), "mean_at_threshold": solve(10.0, False)}},
            {"rules": {"retest_lower_bound_95": None, "mean_at_threshold": solve(12.0, True)}},
            {"rules": {"retest_lower_bound_95": solve(30.0, True), "mean_at_threshold": solve(30.0, True)}}]
    summary = bench.summarize(rows)
    new, old = summary["retest_lower_bound_95"], summary["mean_at_threshold"]
    assert (new["solved"], new["holding"], new["hold_rate"], new["median_seconds_to_solve"]) == (2, 2, 1.0, 30.0)
    assert (old["solved"], old["holding"], old["median_seconds_to_solve"]) == (3, 2, 12.0)
    assert math.isclose(old["hold_rate"], 2 / 3)
