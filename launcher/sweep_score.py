"""What a finished trial scores, and the curve its pruner sees while it runs.

The score comes from the held-out tests the run's journal records, never from a validation: validations pick
the candidates, so the best of them is biased upward, and a tuner selecting on them would select that bias too.

- `test` (maximized): the held-out test of the run's best policy. A solved run's is the test that confirmed the
  solve; otherwise the latest test of its best validated version (the end-of-budget test of a run with no
  threshold); otherwise the best of the tests it took of other candidates. A run that took no test at all (no
  validation reached its threshold) scores -inf: the worst, so the sampler learns from it, and shown as "no test".
- `time_to_solve` (minimized): the env steps (or seconds) at which the confirming test was reported; a run that
  did not solve counts as its whole budget, so unsolved trials rank below every solved one and among themselves
  alike.

The pruner's curve is the best validation mean by each multiple of `interval_env_steps`: Optuna's median pruner
compares trials at equal steps, and runs report validations at env steps of their own; a grid point is reported
once a validation past it shows the curve up to it is final. For a minimized objective the curve is negated, so
that "better" points the same way for the pruner as for the objective.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rlfleet.launcher.sweep_spec import HeldOutObjective, TimeToSolve
from rlfleet.launcher.sweep_trial import Outcome, Validation

SCORED_STATES = ("solved", "budget_exhausted")  # the run ended by itself: anything else is not a result


@dataclass(frozen=True)
class Score:
    value: float
    note: str  # what the value is, for the table: which test, or why the budget


def score(outcome: Outcome, objective: HeldOutObjective | TimeToSolve) -> Score:
    """The objective of a run that ended by itself (`SCORED_STATES`)."""
    confirmed = next((t for t in outcome.tests if t.get("confirmed")), None)
    if isinstance(objective, TimeToSolve):
        if outcome.state == "solved" and confirmed is not None:
            value = float(confirmed["env_steps"] if objective.unit == "env_steps" else confirmed["wall_seconds"])
            return Score(value, f"solved: v{confirmed['policy_version']} confirmed at {_amount(value, objective)}")
        budget = _budget(outcome.config, objective)
        return Score(budget, f"{outcome.state}: counted as the budget, {_amount(budget, objective)}")
    if confirmed is not None:
        solved = "confirmed the solve" if outcome.state == "solved" else "met the solve rule as the budget ran out"
        return Score(float(confirmed["mean"]), f"test of v{confirmed['policy_version']}, which {solved}")
    of_best = [t for t in outcome.tests if t["policy_version"] == outcome.best_version]
    if of_best:
        return Score(float(of_best[-1]["mean"]), f"test of v{outcome.best_version}, the best validated version")
    if outcome.tests:
        top = max(outcome.tests, key=lambda t: float(t["mean"]))
        return Score(float(top["mean"]), f"best of {len(outcome.tests)} tests (v{top['policy_version']}); the best "
                                         f"validated version v{outcome.best_version} was not tested")
    return Score(-math.inf, "the run took no held-out test: no validation qualified a policy for one")


def _budget(config: dict[str, Any], objective: TimeToSolve) -> float:
    budget = config.get("budget") or {}
    return float(budget["max_env_steps"] if objective.unit == "env_steps" else budget["max_wall_seconds"])


def _amount(value: float, objective: TimeToSolve) -> str:
    return f"{value:,.0f} env steps" if objective.unit == "env_steps" else f"{value:,.1f}s"


def curve(validations: list[Validation], interval: int, ended: bool = False) -> dict[int, float]:
    """env steps (multiples of `interval`) -> the best validation mean reported at or before them, for every
    grid point that a later validation has passed (the curve up to it can no longer change); once the run has
    `ended`, up to the first grid point at or past its last validation too (the medians later trials are
    compared with need each finished trial's whole curve)."""
    if not validations:
        return {}
    last = max(v.env_steps for v in validations)
    points = {}
    for step in range(interval, last + interval if ended else last, interval):
        upto = [v.mean for v in validations if v.env_steps <= step]
        if upto:
            points[step] = max(upto)
    return points


def pruner_value(mean: float, direction: str) -> float:
    """A validation mean as the pruner compares it: higher is better for a maximized study, so negated for a
    minimized one."""
    return mean if direction == "maximize" else -mean
