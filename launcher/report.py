"""`rlfleet report RUN...`: one config's runs over several seeds, aggregated as the field reports them (rliable:
interquartile mean, mean, median and optimality gap, each with a stratified bootstrap 95% interval, and a
sample-efficiency curve), into `report.md` and `report.png`.

What a run scores. Its held-out test as its journal records it: the test that confirmed a solved run, the
end-of-budget test of a run with no threshold, or else the latest test of a candidate (mean over
`evaluation.test_episodes` greedy episodes on seeds no training or validation env used). Never a validation
return: the validation that picked a candidate is biased upward, which is what the held-out test exists to undo.
A run with no test in its journal (a threshold run whose validations never nominated a candidate) reads
RUN/test.json, which `rlfleet test RUN` writes from the same held-out seeds; a run with neither is refused,
naming that command: leaving it out would aggregate only the seeds good enough to be tested, and scoring it
anything would invent a number.

Normalisation. rliable's metrics compare scores on one scale where 1 means "good enough": the optimality gap is
the mean shortfall below 1. A score is (return - random) / (target - random): the target is the config's
env.solve_threshold (or `--target`), the random reference is the mean return of a uniformly random policy over
`--random-episodes` episodes of the same env, played here (the zero point of Atari's human-normalised scores).
A run without a threshold needs `--target`: gymnasium 1.x envs no longer declare a reward range, and
normalising by the best of the runs themselves would make a bad config look optimal.

The metrics are rliable's (rliable.metrics); the stratified bootstrap is rliable's too, redone here in a few
lines of numpy: rliable.library imports arch, and arch 7.x (rliable 1.2 requires arch<8) fails to import beside
pandas 3 (`deprecate_kwarg() missing 1 required positional argument`). It draws from a generator seeded with
BOOTSTRAP_SEED, so a report is reproducible (rliable draws from numpy's global one).

The sample-efficiency curve is the IQM of the runs' normalised validation returns (the journal's record of each
version's validation) on a common env-step grid, with a bootstrap band per point: each run's latest validation
at or before each point, from where every run has one to the last of any (a run that ended keeps its last).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import typer

from rlfleet.coordinator.journal.database import stored_meta, stored_rows
from rlfleet.coordinator.state.judge import Judge
from rlfleet.launcher.errors import UserError
from rlfleet.shared.config.run_config import EnvConfig, RunConfig
from rlfleet.shared.extras import MissingExtra, require
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.wire import EvaluationResult, HoldoutResult

SAME_FOR_SEEDS = ("name", "seed")  # what differs between runs of one config over seeds (the name: its seed, time)
METRICS = ("IQM", "mean", "median", "optimality gap")
REPS = 50_000  # rliable's default bootstrap replications, for the aggregate metrics (`--reps`)
CURVE_REPS = 2_000  # per point of the curve: 20 points x 50,000 replications would take minutes
CURVE_POINTS = 20
BOOTSTRAP_SEED = 0
MAX_RANDOM_STEPS = 100_000  # an episode of the random reference that runs longer is cut here


@dataclass(frozen=True)
class SeedRun:
    """One run as the report reads it from its journal."""

    name: str
    seed: int
    state: str
    env_steps: int
    test_mean: float
    test_episodes: int
    test_source: str  # which test: "confirmed", "end of budget", "latest candidate", "rlfleet test"
    policy: str  # the version tested, or the policy file of `rlfleet test`
    validations: tuple[tuple[int, float], ...]  # (env steps, validation mean), in the order reported


@dataclass(frozen=True)
class Interval:
    point: float
    low: float
    high: float

    def text(self) -> str:
        return f"{self.point:.3f} [{self.low:.3f}, {self.high:.3f}]"


@dataclass(frozen=True)
class Curve:
    env_steps: np.ndarray
    iqm: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass(frozen=True)
class Report:
    config: str
    env_id: str
    target: float
    target_from: str
    random_return: float
    random_episodes: int
    runs: list[SeedRun]
    scores: np.ndarray  # normalised, one per run
    metrics: dict[str, Interval]
    reps: int
    curve: Curve | None


# ----- reading runs --------------------------------------------------------------------------------------------
def read_run(run_dir: Path) -> tuple[SeedRun, dict[str, Any]]:
    """A run and its journalled (resolved) config; UserError for a directory that is not a run or has no test."""
    run_dir = run_dir.absolute()
    layout = RunLayout(run_dir.parent.parent, run_dir.name)
    if layout.run_dir != run_dir or not layout.journal.is_file():
        raise UserError(f"{run_dir} is not a run directory (<data dir>/runs/<name> with its journal, "
                        f"{layout.journal.name}): give runs as `rlfleet runs` lists them")
    meta = stored_meta(layout.journal, "config", "lifecycle", "judge", "data")
    if "config" not in meta:
        raise UserError(f"{run_dir}: its journal holds no config yet (the run never started): leave it out")
    validations = tuple((r.env_steps, r.mean) for r in (EvaluationResult.model_validate_json(body) for body, _ in
                                                        stored_rows(layout.journal, Judge.tables[0])))
    tests = [HoldoutResult.model_validate(t) for t in (meta.get("judge") or {}).get("tests", [])]
    state = meta["lifecycle"]["state"] if "lifecycle" in meta else "running"
    if tests:
        test, source = _scored_test(tests, meta["config"])
        mean, episodes, policy = test.mean, test.episodes, f"v{test.policy_version}"
    elif layout.test_json.is_file():
        held = json.loads(layout.test_json.read_text())
        mean, episodes, source, policy = float(held["mean"]), int(held["episodes"]), "rlfleet test", str(held["policy"])
    else:
        raise UserError(f"{run_dir} ({state}) has no held-out test in its journal: run `rlfleet test {run_dir}`, "
                        f"which tests its best policy on the run's held-out seeds and writes {layout.test_json.name} "
                        "for the report (a seed left out would leave only the seeds good enough to be tested)")
    env_steps = int(meta["data"]["env_steps"]) if "data" in meta else 0
    return SeedRun(name=run_dir.name, seed=int(meta["config"]["seed"]), state=state, env_steps=env_steps,
                   test_mean=mean, test_episodes=episodes, test_source=source, policy=policy,
                   validations=validations), meta["config"]


def _scored_test(tests: list[HoldoutResult], config: dict[str, Any]) -> tuple[HoldoutResult, str]:
    """The test that scores a run: the one that confirmed it, else its last (a run with no threshold tests its
    best version once its budget is used up; a threshold run's later candidates validated better)."""
    confirmed = next((t for t in tests if t.confirmed), None)
    if confirmed is not None:
        return confirmed, "confirmed"
    no_threshold = config["env"].get("solve_threshold") is None
    return tests[-1], "end of budget" if no_threshold else "latest candidate"


def config_differences(configs: dict[str, dict[str, Any]]) -> list[str]:
    """Lines naming each setting (dotted path) in which the runs' configs differ, with each run's value; seeds
    and run names are what tells runs of one config apart and are left out."""
    flat = {run: dict(_flatten({k: v for k, v in c.items() if k not in SAME_FOR_SEEDS})) for run, c in configs.items()}
    keys = sorted(set().union(*flat.values()))
    missing = object()
    lines = []
    for key in keys:
        values = {run: f.get(key, missing) for run, f in flat.items()}
        if len({json.dumps(v, sort_keys=True, default=str) for v in values.values()}) > 1:
            shown = ", ".join(f"{run}: {'(not set)' if v is missing else json.dumps(v)}" for run, v in values.items())
            lines.append(f"the runs differ in {key} ({shown})")
    return lines


def _flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _flatten(item, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), value


# ----- scoring -------------------------------------------------------------------------------------------------
def random_return(env: EnvConfig, episodes: int, seed: int) -> float:
    """The mean return of uniformly random actions over `episodes` episodes of `env` (evaluation wrappers only,
    as held-out tests play it): the zero of the normalised score."""
    from rlfleet.shared.envs.build import make_env

    made = make_env(env, training=False)
    made.action_space.seed(seed)
    returns = []
    try:
        for episode in range(episodes):
            made.reset(seed=seed + episode)
            total, done, steps = 0.0, False, 0
            while not done and steps < MAX_RANDOM_STEPS:
                _, reward, terminated, truncated, _ = made.step(made.action_space.sample())
                total, done, steps = total + float(reward), terminated or truncated, steps + 1
            returns.append(total)
    finally:
        made.close()
    return float(np.mean(returns))


def stratified_bootstrap(scores: np.ndarray, functions: list[Callable[[np.ndarray], float]], reps: int,
                         rng: np.random.Generator) -> list[Interval]:
    """Each function's value on `scores` (runs x tasks) with its 95% percentile interval over `reps` stratified
    bootstrap resamples: runs drawn with replacement within each task, as rliable's StratifiedBootstrap draws
    them (its `get_interval_estimates`, method "percentile"), from a seeded generator of our own."""
    runs, tasks = scores.shape
    picks = rng.integers(0, runs, size=(reps, runs, tasks))
    resampled = np.take_along_axis(scores[None, :, :], picks, axis=1)
    values = np.array([[f(sample) for f in functions] for sample in resampled])
    low, high = np.percentile(values, [2.5, 97.5], axis=0)
    return [Interval(float(f(scores)), float(lo), float(hi)) for f, lo, hi in zip(functions, low, high, strict=True)]


def _metrics() -> dict[str, Callable[[np.ndarray], float]]:
    """rliable's aggregate metrics, by the names the report shows."""
    metrics = require("rliable.metrics", "report", "rlfleet report")
    return {"IQM": metrics.aggregate_iqm, "mean": metrics.aggregate_mean, "median": metrics.aggregate_median,
            "optimality gap": metrics.aggregate_optimality_gap}


def aggregate(scores: np.ndarray, reps: int = REPS) -> dict[str, Interval]:
    """IQM, mean, median and optimality gap of normalised scores (one per run, one task) with 95% stratified
    bootstrap intervals. rliable's median is the median of the tasks' mean scores: with one env it is the mean."""
    functions = _metrics()
    found = stratified_bootstrap(scores.reshape(-1, 1), [functions[m] for m in METRICS], reps,
                                 np.random.default_rng(BOOTSTRAP_SEED))
    return dict(zip(METRICS, found, strict=True))


def sample_efficiency(runs: list[SeedRun], normalise: Callable[[float], float]) -> Curve | None:
    """The IQM of the runs' normalised validation returns on a common env-step grid, with a bootstrap band (each
    point resampled on its own, as rliable's interval estimates of a runs x tasks x points array are). The grid
    starts where every run has a validation and ends at the last validation of any: a run that ended earlier (a
    solved run stops) keeps its last validation, the score of the policy it ended with. None when a run has no
    validation or the span is empty."""
    if any(not run.validations for run in runs):
        return None
    start = max(min(steps for steps, _ in run.validations) for run in runs)
    end = max(max(steps for steps, _ in run.validations) for run in runs)
    if end <= start:
        return None
    grid = np.linspace(start, end, CURVE_POINTS)
    table = np.array([[normalise(_as_of(run.validations, point)) for point in grid] for run in runs])
    iqm = _metrics()["IQM"]
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    found = [stratified_bootstrap(table[:, [i]], [iqm], CURVE_REPS, rng)[0] for i in range(len(grid))]
    return Curve(grid, np.array([f.point for f in found]), np.array([f.low for f in found]),
                 np.array([f.high for f in found]))


def _as_of(validations: tuple[tuple[int, float], ...], env_steps: float) -> float:
    """The latest validation at or before `env_steps` (validations arrive in env-step order; ties: the last)."""
    return [mean for steps, mean in validations if steps <= env_steps][-1]


def build_report(run_dirs: list[Path], target: float | None, random_episodes: int, reps: int = REPS) -> Report:
    """Read, check and score the runs; UserError with every problem found."""
    if len(run_dirs) < 2:
        raise UserError("give at least two runs (the same config over seeds): an interval needs more than one")
    read, problems = [], []
    for run_dir in run_dirs:
        try:
            read.append(read_run(run_dir))
        except UserError as exc:
            problems += exc.lines
    if problems:
        raise UserError(*problems)
    runs = [run for run, _ in read]
    configs = {run.name: config for run, config in read}
    names = [run.name for run in runs]
    if len(set(names)) < len(names):
        raise UserError(f"a run is named twice ({', '.join(sorted({n for n in names if names.count(n) > 1}))}): "
                        "give each run once")
    differences = config_differences(configs)
    if differences:
        raise UserError(*differences, "a report aggregates one config over seeds: give runs that differ only in "
                                      "their seed")
    config = RunConfig.model_validate(next(iter(configs.values())))
    if config.evaluation.against:
        raise UserError("these runs are scored by a battle rule (evaluation.against): their test returns are game "
                        "results, not returns to normalise; compare their win rates in `rlfleet runs`")
    resolved, target_from = (target, "--target") if target is not None else (config.env.threshold,
                                                                             "env.solve_threshold")
    if resolved is None:
        raise UserError(f"{config.env.id} has no env.solve_threshold in these runs: give --target RETURN, the "
                        "return that normalises to 1 (gymnasium envs declare no return range to take it from)")
    reference = random_return(config.env, random_episodes, config.seed)
    if resolved <= reference:
        raise UserError(f"the target {resolved:g} ({target_from}) is not above a random policy's mean return "
                        f"{reference:.2f} on {config.env.id}: scores cannot be normalised; give a higher --target")

    def normalise(value: float) -> float:
        return (value - reference) / (resolved - reference)

    scores = np.array([normalise(run.test_mean) for run in runs])
    return Report(config=runs[0].name.partition("__s")[0], env_id=config.env.id, target=resolved,
                  target_from=target_from,
                  random_return=reference, random_episodes=random_episodes, runs=runs, scores=scores,
                  metrics=aggregate(scores, reps), reps=reps, curve=sample_efficiency(runs, normalise))


# ----- writing -------------------------------------------------------------------------------------------------
def markdown(report: Report) -> str:
    """report.md: the aggregate metrics with their intervals, how scores were normalised, and the runs."""
    lines = [f"# rlfleet report: {report.config} on {report.env_id}, {len(report.runs)} seeds", "",
             f"Normalised score = (held-out test mean - random) / (target - random): target {report.target:g} "
             f"({report.target_from}), random {report.random_return:.2f} (mean return of uniformly random actions "
             f"over {report.random_episodes} episodes). Intervals: 95% stratified bootstrap over runs "
             f"({report.reps:,} replications; rliable's metrics).", "",
             "| metric | normalised score | 95% interval | as a return, with its interval |", "|---|---:|---:|---:|"]
    places = _return_places(report)
    for name, found in report.metrics.items():
        point, low, high = (f"{_denormalise(report, v):.{places}f}" for v in (found.point, found.low, found.high))
        back = "-" if name == "optimality gap" else f"{point} [{low}, {high}]"
        lines.append(f"| {name} | {found.point:.3f} | [{found.low:.3f}, {found.high:.3f}] | {back} |")
    lines += ["", "| run | seed | state | env steps | held-out test | episodes | policy | score |",
              "|---|---:|---|---:|---|---:|---|---:|"]
    for run, score in zip(report.runs, report.scores, strict=True):
        lines.append(f"| {run.name} | {run.seed} | {run.state} | {run.env_steps:,} | {run.test_mean:.{places}f} "
                     f"({run.test_source}) | {run.test_episodes} | {run.policy} | {score:.3f} |")
    if report.curve is None:
        lines += ["", "No sample-efficiency curve: the runs share no span of env steps with a validation in each."]
    else:
        lines += ["", f"Sample efficiency (report.png, right): IQM of the normalised validation returns at "
                      f"{len(report.curve.env_steps)} env-step points from {report.curve.env_steps[0]:,.0f} to "
                      f"{report.curve.env_steps[-1]:,.0f}, bootstrap bands of {CURVE_REPS:,} replications."]
    return "\n".join(lines) + "\n"


def _return_places(report: Report) -> int:
    """Decimals that show a thousandth of the normalised range as a return: one for CartPole (random 22 to 475),
    three for returns within [-1, 1] (POPGym's), where one decimal would print every run's test the same."""
    return max(1, 3 - math.floor(math.log10(report.target - report.random_return)))


def _denormalise(report: Report, score: float) -> float:
    return report.random_return + score * (report.target - report.random_return)


def draw(report: Report, path: Path) -> None:
    """report.png: the interval estimates of the four metrics, and the sample-efficiency curve with its band."""
    matplotlib = require("matplotlib", "plot", "rlfleet report's plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (bars, curve) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [1, 1.4]})
    for row, name in enumerate(METRICS):
        found = report.metrics[name]
        bars.barh(row, found.high - found.low, left=found.low, height=0.6, color="tab:blue", alpha=0.6)
        bars.plot([found.point, found.point], [row - 0.3, row + 0.3], color="black", lw=2)
    bars.set_yticks(range(len(METRICS)), METRICS)
    bars.invert_yaxis()
    bars.axvline(1.0, color="gray", ls="--", lw=0.8)
    bars.set_xlabel("normalised held-out test score (1 = target)")
    bars.set_title("aggregate metrics, 95% stratified bootstrap CIs")
    if report.curve is not None:
        c = report.curve
        curve.plot(c.env_steps, c.iqm, color="tab:blue", label="IQM of validation returns")
        curve.fill_between(c.env_steps, c.low, c.high, color="tab:blue", alpha=0.25, label="95% bootstrap band")
        curve.axhline(1.0, color="gray", ls="--", lw=0.8, label=f"target {report.target:g}")
        curve.legend(loc="lower right", fontsize=8)
    else:
        curve.text(0.5, 0.5, "no env-step span with a validation in every run", ha="center", transform=curve.transAxes)
    curve.set_xlabel("env steps")
    curve.set_ylabel("normalised score")
    curve.set_title("sample efficiency")
    curve.grid(alpha=0.3)
    fig.suptitle(f"{report.config} on {report.env_id}: {len(report.runs)} seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def report_command(run_dirs: list[Path], out: Path, target: float | None, random_episodes: int, reps: int) -> None:
    """`rlfleet report`: print the table, write OUT/report.md and OUT/report.png."""
    from rlfleet.shared.storage.local import atomic_write

    try:
        report = build_report(run_dirs, target, random_episodes, reps)
        text = markdown(report)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write(out / "report.md", text.encode())
        draw(report, out / "report.png")
    except MissingExtra as exc:
        raise UserError(str(exc)) from exc
    typer.echo(text, nl=False)
    typer.echo(f"\nwrote {out / 'report.md'} and {out / 'report.png'}")
