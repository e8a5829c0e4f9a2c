"""Elo ratings from won / drawn / lost records: Bradley-Terry's maximum likelihood, random at 0."""

from __future__ import annotations

import math

import pytest

from rlfleet.coordinator.state.ratings import elo_ratings


def expected_gap(share: float) -> float:
    """The Elo difference at which the stronger side scores `share` of the points."""
    return 400 * math.log10(share / (1 - share))


def test_random_is_the_anchor_and_a_score_share_gives_its_elo_gap() -> None:
    ratings = elo_ratings([("v1", "random", 7600, 0, 2400)])
    assert ratings["random"] == 0.0
    assert ratings["v1"] == pytest.approx(expected_gap(0.76), abs=0.5)  # the prior's one draw barely counts


def test_a_draw_is_half_a_win_for_each_side() -> None:
    drawn = elo_ratings([("v1", "random", 500, 1000, 500)])
    assert drawn["v1"] == pytest.approx(0.0, abs=1e-6)
    halves = elo_ratings([("v1", "random", 600, 200, 200)])  # 700 of 1000 points
    assert halves["v1"] == pytest.approx(expected_gap(0.7), abs=0.5)


def test_ratings_chain_through_games_between_versions() -> None:
    """v2 never met random: its rating comes through v1, whom it beat 3 to 1."""
    ratings = elo_ratings([("v1", "random", 7500, 0, 2500), ("v2", "v1", 7500, 0, 2500)])
    assert ratings["v2"] - ratings["v1"] == pytest.approx(expected_gap(0.75), abs=3)
    assert ratings["v1"] == pytest.approx(expected_gap(0.75), abs=3)


def test_a_version_that_won_every_game_has_a_finite_rating_that_grows_with_the_games() -> None:
    few, many = elo_ratings([("v1", "random", 10, 0, 0)]), elo_ratings([("v1", "random", 1000, 0, 0)])
    assert math.isfinite(few["v1"]) and math.isfinite(many["v1"])
    assert 0 < few["v1"] < many["v1"]


def test_records_from_either_side_agree_and_empty_ones_are_ignored() -> None:
    one = elo_ratings([("v1", "lookahead", 30, 10, 60), ("lookahead", "random", 80, 10, 10)])
    other = elo_ratings([("lookahead", "v1", 60, 10, 30), ("random", "lookahead", 10, 10, 80), ("v3", "v1", 0, 0, 0)])
    assert set(other) == {"random", "lookahead", "v1"}
    for name in one:
        assert one[name] == pytest.approx(other[name], abs=1e-6)
    assert elo_ratings([]) == {"random": 0.0}
