"""The rule that turns a held-out test of a threshold run into "solved": one definition for the coordinator's judge
(coordinator/state/judge.py, whose docstring argues for it), the evaluator's `best/`, `rlfleet test` and the
benchmarks, so that every place that says "solved" means the same thing.

A test confirms when the one-sided 95% lower prediction bound of the mean of an independent re-test of as many
episodes reaches the threshold: mean - t_{0.95, n-1} · s · √(2/n) >= threshold (shared/stats.py). Zero-variance
tests (CartPole's 500 every episode) have a bound equal to their mean, so they confirm as before.

Two-player runs with `evaluation.against` keep their own battle rule (shared/wire/battles.py); this module is the
threshold rule only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from rlfleet.shared.stats import MeanEstimate, estimate, retest_lower_bound

RULE: Final = "retest_lower_bound_95"
"""The rule's name, as HoldoutResult.rule and `rlfleet test --json` carry it."""
RULE_TEXT = "95% lower prediction bound of an independent re-test's mean >= threshold"
"""The rule in words, for every place that shows a solve."""
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Verdict:
    """What the rule made of a block of test episodes."""

    estimate: MeanEstimate
    bound: float | None  # the re-test lower bound; None for a single episode, which confirms nothing
    confirmed: bool


def judge(returns: Sequence[float], threshold: float | None) -> Verdict:
    """Apply the rule to the returns of one held-out test; a run with no threshold (env.solve_threshold null)
    gets the bound but never a confirmation."""
    found = estimate(returns)
    bound = retest_lower_bound(found.mean, found.std, found.episodes, CONFIDENCE)
    return Verdict(found, bound, threshold is not None and bound is not None and bound >= threshold)
