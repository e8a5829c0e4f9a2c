"""`rlfleet report`: one config's runs over seeds, read from journals the coordinator's own components wrote,
scored by their held-out tests, aggregated with rliable's metrics and stratified bootstrap intervals; runs of
different configs, a run with no held-out test and a run with no threshold and no --target are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import trim_mean
from typer.testing import CliRunner

from rlfleet.launcher.cli import app
from rlfleet.launcher.report import SeedRun, random_return, sample_efficiency, stratified_bootstrap
from rlfleet.shared.config.run_config import RunConfig
from tests.support.run_files import write_run
from tests.support.seed_runs import journal_run

TESTS = [[500.0] * 10, [480.0] * 5 + [470.0] * 5, [200.0] * 10, [490.0] * 10, [30.0] * 10]  # test means 500 .. 30


def config(seed: int, **changes: object) -> RunConfig:
    return RunConfig.model_validate({"name": "cartpole-ppo", "seed": seed,
                                     "env": {"id": "CartPole-v1", "solve_threshold": 475.0},
                                     "evaluation": {"episodes": 2, "num_envs": 2, "test_episodes": 10,
                                                    "test_num_envs": 10},
                                     **changes})


def seeds(data_dir: Path, tests: list[list[float]] = TESTS) -> list[Path]:
    """Runs of one config over seeds: validations at 1,000 / 2,000 / 3,000 env steps, then a held-out test."""
    return [journal_run(data_dir, config(seed), [(1_000 * (i + 1), [mean, mean]) for i, mean in
                                                 enumerate((20.0, 100.0 * (seed + 1), float(np.mean(test))))], test)
            for seed, test in enumerate(tests)]


def report(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["report", *map(str, args), "--reps", "2000", "--random-episodes", "20"])
    return result.exit_code, result.output


def test_five_seeds_print_iqm_with_its_interval_and_write_the_table_and_plot(tmp_path: Path) -> None:
    runs = seeds(tmp_path / "data")
    code, output = report(*runs, "--out", tmp_path / "out")
    assert code == 0, output
    random = random_return(config(0).env, 20, 0)
    scores = np.array([(np.mean(t) - random) / (475.0 - random) for t in TESTS])
    iqm_row = next(line for line in output.splitlines() if line.startswith("| IQM |"))
    point, interval, as_return = (cell.strip() for cell in iqm_row.split("|")[2:5])
    assert float(point) == pytest.approx(trim_mean(scores, 0.25), abs=1e-3)  # the middle three of five runs
    low, high = (float(v) for v in interval.strip("[]").split(","))
    assert low < float(point) < high and low >= scores.min() and high <= scores.max()
    back, back_interval = as_return.split(" ", 1)
    assert float(back) == pytest.approx(np.mean([480.0 - 5.0, 490.0, 200.0]), abs=0.1)
    back_low, back_high = (float(v) for v in back_interval.strip("[]").split(","))
    assert [back_low, back_high] == pytest.approx([random + v * (475.0 - random) for v in (low, high)], abs=0.2)
    gap = next(line for line in output.splitlines() if line.startswith("| optimality gap |"))
    assert float(gap.split("|")[2]) == pytest.approx(np.mean(1 - np.minimum(scores, 1.0)), abs=1e-3)
    for run, seed in zip(runs, range(5), strict=True):  # every run with its seed and its test's source
        row = next(line for line in output.splitlines() if line.startswith(f"| {run.name} |"))
        assert row.split("|")[2].strip() == str(seed) and ("(confirmed)" in row or "(latest candidate)" in row)
    assert (tmp_path / "out" / "report.md").read_text() in output
    assert (tmp_path / "out" / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_runs_of_different_configs_are_refused_naming_the_difference(tmp_path: Path) -> None:
    runs = seeds(tmp_path / "data", TESTS[:2])
    other = journal_run(tmp_path / "data", config(7, budget={"max_env_steps": 5_000}),
                        [(1_000, [500.0, 500.0])], [500.0] * 10)
    code, output = report(*runs, other, "--out", tmp_path / "out")
    assert code == 2
    assert "the runs differ in budget.max_env_steps" in output and ": 5000)" in output
    assert "seed" not in output.split("differ in")[1].split("(")[0]
    assert not (tmp_path / "out").exists()


def test_a_run_with_no_held_out_test_is_refused_until_rlfleet_test_scores_it(tmp_path: Path) -> None:
    runs = seeds(tmp_path / "data", TESTS[:2])
    untested = journal_run(tmp_path / "data", config(5), [(1_000, [100.0, 120.0])], None)
    code, output = report(*runs, untested, "--out", tmp_path / "out")
    assert code == 2 and f"rlfleet test {untested}" in output and "no held-out test" in output
    write_run(tmp_path / "data", config(5).model_copy(update={"name": untested.name}))
    tested = CliRunner().invoke(app, ["test", str(untested), "--episodes", "10"])
    assert tested.exit_code == 0, tested.output
    code, output = report(*runs, untested, "--out", tmp_path / "out")
    assert code == 0, output
    assert "(rlfleet test)" in next(line for line in output.splitlines() if line.startswith(f"| {untested.name} |"))


def test_a_run_without_a_threshold_needs_a_target(tmp_path: Path) -> None:
    runs = [journal_run(tmp_path / "data", config(seed, env={"id": "CartPole-v1", "solve_threshold": None}),
                        [(1_000, [300.0, 300.0])], [300.0 + seed] * 10) for seed in range(3)]
    code, output = report(*runs, "--out", tmp_path / "out")
    assert code == 2 and "--target" in output
    code, output = report(*runs, "--out", tmp_path / "out", "--target", "500")
    assert code == 0, output
    assert "target 500 (--target)" in output and "(end of budget)" in output


def test_returns_within_one_print_with_the_places_that_tell_runs_apart(tmp_path: Path) -> None:
    """POPGym's returns lie in [-1, 1]: at one decimal every run's test and the IQM would read -0.4."""
    env = {"id": "popgym.envs.repeat_previous:RepeatPreviousEasy", "solve_threshold": None}
    runs = [journal_run(tmp_path / "data", config(seed, env=env), [(1_000, [-0.45, -0.45])], [mean] * 10)
            for seed, mean in enumerate((-0.4142, -0.4189, -0.4318))]
    code, output = report(*runs, "--out", tmp_path / "out", "--target", "1")
    assert code == 0, output
    tests = [next(line for line in output.splitlines() if line.startswith(f"| {run.name} |")).split("|")[5]
             for run in runs]
    assert [cell.split()[0] for cell in tests] == ["-0.414", "-0.419", "-0.432"]
    iqm_row = next(line for line in output.splitlines() if line.startswith("| IQM |"))
    assert iqm_row.split("|")[4].split()[0] == "-0.422"  # their mean: a quarter of three runs trims none


def test_the_bootstrap_is_reproducible_and_resamples_runs() -> None:
    scores = np.array([[0.1], [0.5], [0.9], [1.0], [1.2]])
    mean = [lambda x: float(np.mean(x))]
    first = stratified_bootstrap(scores, mean, 5_000, np.random.default_rng(0))
    assert first == stratified_bootstrap(scores, mean, 5_000, np.random.default_rng(0))
    # the percentile interval of a mean of 5 runs: close to the normal one, mean ± 1.96 · std / sqrt(5)
    half = 1.96 * scores.std() / np.sqrt(5)
    assert first[0].low == pytest.approx(0.74 - half, abs=0.05) and first[0].high == pytest.approx(0.74 + half,
                                                                                                    abs=0.05)
    flat = stratified_bootstrap(np.full((4, 1), 0.7), mean, 100, np.random.default_rng(0))[0]
    assert (flat.point, flat.low, flat.high) == pytest.approx((0.7, 0.7, 0.7))


def test_the_curve_spans_every_run_and_keeps_an_ended_runs_last_validation() -> None:
    def run(validations: tuple[tuple[int, float], ...]) -> SeedRun:
        return SeedRun("r", 0, "solved", 0, 1.0, 10, "confirmed", "v1", validations)

    early = run(((100, 0.0), (200, 1.0)))  # solved at 200 env steps and stopped
    late = run(((150, 0.0), (1_000, 1.0)))
    curve = sample_efficiency([early, late, late], lambda v: v)
    assert curve is not None
    assert curve.env_steps[0] == 150 and curve.env_steps[-1] == 1_000  # where all have one, to the last of any
    # at 150 all three score 0; from 200 the early run keeps its 1 (IQM of three: their mean); at the end all 1
    assert (curve.iqm[0], curve.iqm[2], curve.iqm[-1]) == pytest.approx((0.0, 1 / 3, 1.0))
    assert sample_efficiency([early, run(())], lambda v: v) is None
