"""Pearson's chi-square test, written out (no scipy in the test dependencies): the statistic, its survival
function and critical values, for checking that samplers draw with the probabilities they promise."""

from __future__ import annotations

import math

import numpy as np


def _regularized_gamma_q(a: float, x: float) -> float:
    """Q(a, x) = Gamma(a, x) / Gamma(a): series for P below a + 1, Lentz's continued fraction above."""
    if x <= 0:
        return 1.0
    log_prefix = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        while abs(term) > abs(total) * 1e-16:
            n += 1
            term *= x / n
            total += term
        return 1.0 - total * math.exp(log_prefix)
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-16:
            break
    return math.exp(log_prefix) * h


def chi2_sf(x: float, df: int) -> float:
    """P(X > x) for X ~ chi-square with `df` degrees of freedom."""
    return _regularized_gamma_q(df / 2, x / 2)


def chi2_critical(df: int, significance: float = 0.001) -> float:
    """The x with P(chi2_df > x) = significance, by bisection on the survival function."""
    lo, hi = 0.0, float(df)
    while chi2_sf(hi, df) > significance:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if chi2_sf(mid, df) > significance else (lo, mid)
    return (lo + hi) / 2


def chi2_statistic(observed: np.ndarray, expected: np.ndarray) -> float:
    observed, expected = np.asarray(observed, np.float64), np.asarray(expected, np.float64)
    assert observed.shape == expected.shape and np.all(expected > 0)
    assert math.isclose(observed.sum(), expected.sum(), rel_tol=1e-9)
    return float(((observed - expected) ** 2 / expected).sum())
