"""Student's t: quantiles against published table values, the CDF against closed forms, and the intervals' edges."""

from __future__ import annotations

import math

import pytest

from rlfleet.shared.stats import ci95, estimate, regularized_beta, retest_lower_bound, t_cdf, t_quantile


@pytest.mark.parametrize(("p", "df", "table", "last_digit"), [  # last_digit: the table's precision
    (0.975, 1, 12.7062, 1e-4), (0.975, 9, 2.26216, 1e-5), (0.95, 99, 1.66039, 1e-5), (0.975, 99, 1.98422, 1e-5),
    (0.95, 1, 6.31375, 1e-5), (0.975, 2, 4.30265, 1e-5), (0.995, 30, 2.75000, 1e-5), (0.9995, 1, 636.619, 1e-3),
])
def test_quantiles_match_the_published_tables(p: float, df: int, table: float, last_digit: float) -> None:
    assert t_quantile(p, df) == pytest.approx(table, abs=last_digit / 2)


def test_large_degrees_of_freedom_tend_to_the_normal() -> None:
    assert t_quantile(0.975, 10**6) == pytest.approx(1.95996, abs=1e-5)
    assert t_quantile(0.975, 10**9) == pytest.approx(1.959964, abs=1e-6)


def test_the_cdf_matches_closed_forms_and_is_symmetric() -> None:
    for t in (-30.0, -1.5, 0.0, 0.3, 4.0):
        assert t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-13)  # Cauchy
        assert t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-13)
        assert t_cdf(t, 7) + t_cdf(-t, 7) == pytest.approx(1.0, abs=1e-14)
    assert t_quantile(0.025, 9) == -t_quantile(0.975, 9)
    assert t_cdf(t_quantile(0.9, 13), 13) == pytest.approx(0.9, abs=1e-13)


def test_the_incomplete_beta_on_both_sides_of_its_switch() -> None:
    assert regularized_beta(1.0, 1.0, 0.3) == pytest.approx(0.3, abs=1e-14)  # uniform
    binomial = sum(math.comb(4, j) * 0.9**j * 0.1 ** (4 - j) for j in (2, 3, 4))  # I_x(2, 3): P(Bin(4, x) >= 2)
    assert regularized_beta(2.0, 3.0, 0.9) == pytest.approx(binomial, abs=1e-14)
    assert regularized_beta(2.0, 3.0, 0.1) == pytest.approx(sum(math.comb(4, j) * 0.1**j * 0.9 ** (4 - j)
                                                                for j in (2, 3, 4)), abs=1e-14)
    assert regularized_beta(5.0, 0.5, 0.0) == 0.0 and regularized_beta(5.0, 0.5, 1.0) == 1.0


@pytest.mark.parametrize(("p", "df"), [(0.0, 5), (1.0, 5), (0.5, 0)])
def test_out_of_range_arguments_say_what_is_wrong(p: float, df: int) -> None:
    with pytest.raises(ValueError, match="0 < p < 1|degree of freedom"):
        t_quantile(p, df)


def test_an_estimate_uses_the_sample_standard_deviation_and_t() -> None:
    found = estimate([1.0, 2.0, 3.0, 4.0])
    assert (found.mean, found.std) == (2.5, pytest.approx(math.sqrt(5 / 3)))
    low, high = found.ci95 or (0.0, 0.0)
    assert (high - low) / 2 == pytest.approx(3.18245 * math.sqrt(5 / 3) / 2, rel=1e-5)  # t_{0.975,3}


def test_one_episode_has_no_interval_and_no_bound() -> None:
    found = estimate([7.0])
    assert (found.mean, found.std, found.ci95) == (7.0, 0.0, None)
    assert retest_lower_bound(7.0, 0.0, 1) is None and ci95(7.0, 0.0, 1) is None
    with pytest.raises(ValueError, match="no episodes"):
        estimate([])


def test_zero_variance_gives_a_point_interval_and_a_bound_at_the_mean() -> None:
    found = estimate([500.0] * 100)
    assert found.std == 0.0 and found.ci95 == (500.0, 500.0)
    assert retest_lower_bound(found.mean, found.std, found.episodes) == 500.0


def test_the_retest_bound_widens_the_one_sided_t_by_root_two() -> None:
    assert retest_lower_bound(480.0, 50.0, 100) == pytest.approx(480 - 1.66039 * 50 * math.sqrt(0.02), abs=1e-3)
