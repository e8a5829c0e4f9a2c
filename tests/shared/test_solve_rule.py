"""The solve rule: a test confirms when the 95% lower prediction bound of a re-test's mean reaches the threshold."""

from __future__ import annotations

import math

import pytest

from rlfleet.shared.solve_rule import judge


def test_no_spread_confirms_at_the_mean_itself() -> None:
    verdict = judge([500.0] * 100, 475.0)
    assert verdict.confirmed and verdict.bound == 500.0
    assert judge([475.0] * 100, 475.0).confirmed  # the threshold reached exactly, every episode


def test_a_mean_above_the_threshold_with_spread_must_clear_it_by_the_bound() -> None:
    returns = [-150.0, -50.0] * 50  # Acrobot-like: mean -100, sample std 50.25
    verdict = judge(returns, -110.0)
    assert verdict.bound == pytest.approx(-100.0 - 1.66039 * 50.2519 * math.sqrt(0.02), abs=1e-3)  # -111.8
    assert not verdict.confirmed and judge(returns, -112.0).confirmed


def test_one_episode_confirms_nothing() -> None:
    verdict = judge([500.0], 475.0)
    assert (verdict.bound, verdict.confirmed) == (None, False)
