"""`rlfleet runs`: each run of a data directory with its state, env steps, best held-out test and threshold, read
from its journal (a run with no journal yet is listed as such)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from rlfleet.coordinator.journal.database import Journal
from rlfleet.launcher.cli import app
from rlfleet.launcher.runs import confirmation
from rlfleet.shared.storage.layout import RunLayout


def test_runs_lists_each_run_with_its_state_steps_and_best_test(tmp_path: Path) -> None:
    for name, state, steps, tests, threshold in (("a__s0__1", "solved", 12_288, [480.5, 471.0], 475.0),
                                                 ("b__s1__2", "stopped", 64, [], 475.0),
                                                 ("d__s0__4", "budget_exhausted", 9_000, [3100.5], None)):
        journal = Journal(RunLayout(tmp_path, name).journal)
        journal.submit([], {"lifecycle": {"state": state, "message": "", "elapsed": 1.0, "ended_elapsed": 1.0,
                                          "resumes": 0},
                            "data": {"env_steps": steps}, "judge": {"tests": [
                                {"policy_version": v, "mean": m, "ci95": [m - 2, m + 2], "confirmed": m > 475,
                                 "rule": "retest_lower_bound_95", "bound": m - 3} for v, m in enumerate(tests, 1)]},
                            "config": {"env": {"solve_threshold": threshold}, "evaluation": {}}}).result()
        journal.close()
    (tmp_path / "runs" / "c__s0__3").mkdir()  # started, nothing journalled yet
    result = CliRunner().invoke(app, ["runs", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line.split()[1:] for line in result.output.splitlines()[1:]}
    assert lines["a__s0__1"][:3] == ["solved", "12,288", "480.5"]
    assert lines["b__s1__2"][:3] == ["stopped", "64", "-"]
    assert lines["c__s0__3"][:3] == ["no", "journal", "-"]
    solved = next(line for line in result.output.splitlines() if line.startswith("a__s0__1"))
    assert solved.endswith("v1 480.5 [478.5, 482.5], re-test bound 477.5 (retest_lower_bound_95)")
    assert " ".join(lines["b__s1__2"][3:]) == "0 0 475 -"
    # what 'solved' means: the threshold, or none for a run that trains to its budget
    assert (lines["a__s0__1"][5], lines["d__s0__4"][5:7], lines["c__s0__3"][6]) == ("475", ["no", "threshold"], "-")


def test_a_confirmation_journalled_before_the_rule_was_recorded_names_the_old_rule() -> None:
    old = {"policy_version": 4, "mean": 480.0, "ci95": [478.0, 482.0], "confirmed": True}
    assert confirmation(old) == "v4 480.0 [478.0, 482.0] (mean_at_threshold)"
