"""Student's t intervals of a mean return: one definition for the coordinator's held-out tests, the solve rule
(shared/solve_rule.py), `rlfleet test` and the benchmarks, so that all of them report comparable numbers.

Returns are a sample, so the spread is the sample standard deviation (ddof=1) and the quantiles are Student's t
with n - 1 degrees of freedom: the normal approximation this module used before was 22% too narrow at 10
episodes and 1.2% at 100. scipy is no dependency of rlfleet, so the t distribution is computed here: its CDF is
the regularized incomplete beta function (a continued fraction, evaluated by the modified Lentz method as in
Numerical Recipes §6.4), and a quantile is the root of CDF(t) = p, found by bisection to double precision inside
a bracket that doubles until it holds the root. That is exact to about 1e-12, which is all a 95% interval
needs; quantiles are cached, since a run asks for the same few again and again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

_CF_EPS = 1e-15
_CF_TINY = 1e-300
_CF_MAX_TERMS = 100_000  # the fraction needs O(sqrt(df)) terms: enough past a billion degrees of freedom


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz); converges for x < (a+1)/(a+b+2)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _CF_TINY else _CF_TINY)
    h = d
    for m in range(1, _CF_MAX_TERMS):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _CF_TINY else _CF_TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _CF_TINY else _CF_TINY
            h *= d * c
        if abs(d * c - 1.0) < _CF_EPS:
            return h
    raise ArithmeticError(f"the incomplete beta fraction did not converge (a={a}, b={b}, x={x})")


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"the incomplete beta function takes 0 <= x <= 1, got {x}")
    if x in (0.0, 1.0):
        return x
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom."""
    if df < 1:
        raise ValueError(f"Student's t needs at least 1 degree of freedom, got {df}")
    tail = 0.5 * regularized_beta(df / 2.0, 0.5, df / (df + t * t))  # P(T > |t|)
    return 1.0 - tail if t >= 0 else tail


@lru_cache(maxsize=1024)
def t_quantile(p: float, df: int) -> float:
    """The t with P(T <= t) = p for Student's t with `df` degrees of freedom (0 < p < 1)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    if df < 1:
        raise ValueError(f"Student's t needs at least 1 degree of freedom, got {df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        low, high = high, 2.0 * high
    while True:
        middle = 0.5 * (low + high)
        if middle in (low, high):  # the bracket is one ulp wide
            return middle
        if t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle


@dataclass(frozen=True)
class MeanEstimate:
    """What a block of episodes says about the policy's mean return."""

    mean: float
    std: float  # the sample standard deviation (ddof=1); 0 for a single episode, which says nothing of the spread
    episodes: int

    @property
    def ci95(self) -> tuple[float, float] | None:
        """The two-sided 95% t interval of the mean; None for one episode."""
        return ci95(self.mean, self.std, self.episodes)


def estimate(returns: Sequence[float]) -> MeanEstimate:
    """Mean and sample standard deviation of the returns of a block of episodes."""
    n = len(returns)
    if n == 0:
        raise ValueError("no episodes to estimate a mean from")
    mean = math.fsum(returns) / n
    std = math.sqrt(math.fsum((r - mean) ** 2 for r in returns) / (n - 1)) if n > 1 else 0.0
    return MeanEstimate(mean, std, n)


def ci95(mean: float, std: float, episodes: int) -> tuple[float, float] | None:
    """mean ± t_{0.975, n-1} · std / √n, `std` the sample standard deviation; None below 2 episodes."""
    if episodes < 2:
        return None
    half = t_quantile(0.975, episodes - 1) * std / math.sqrt(episodes)
    return mean - half, mean + half


def retest_lower_bound(mean: float, std: float, episodes: int, confidence: float = 0.95) -> float | None:
    """The one-sided lower prediction bound, at `confidence`, of the mean of an independent re-test of as many
    episodes: mean - t_{confidence, n-1} · std · √(2/n). The re-test's mean and this block's differ by a normal
    of variance 2σ²/n, and dividing by std·√(2/n) makes that difference Student's t with n - 1 degrees of
    freedom. None below 2 episodes, which give no spread to bound with."""
    if episodes < 2:
        return None
    return mean - t_quantile(confidence, episodes - 1) * std * math.sqrt(2.0 / episodes)
