"""Schedules' values along a run and the configs they refuse, naming the field."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from rlfleet.shared.algorithms.impala import ImpalaParams
from rlfleet.shared.algorithms.ppo import PPOParams
from rlfleet.shared.algorithms.sac import SACParams
from rlfleet.shared.config.schedules import Schedule


def test_linear_goes_from_the_field_s_value_to_end_and_stays() -> None:
    s = Schedule(kind="linear", end=0.0, over=1000)
    assert [s.value(1e-3, at) for at in (0, 250, 1000, 5000)] == pytest.approx([1e-3, 7.5e-4, 0.0, 0.0])


def test_cosine_is_slow_at_both_ends_and_halfway_at_the_middle() -> None:
    s = Schedule(kind="cosine", end=0.1, over=100)
    assert s.value(1.0, 0) == pytest.approx(1.0) and s.value(1.0, 100) == pytest.approx(0.1)
    assert s.value(1.0, 50) == pytest.approx(0.55)
    assert s.value(1.0, 10) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.1)))
    assert 1.0 - s.value(1.0, 10) < s.value(1.0, 40) - s.value(1.0, 50)  # flatter near the start than mid-way


def test_piecewise_joins_its_knots_after_the_field_s_value_and_holds_the_last() -> None:
    s = Schedule(kind="piecewise", points=((100, 0.5), (300, 0.1)))
    assert [s.value(1.0, at) for at in (0, 50, 100, 200, 300, 10_000)] == pytest.approx([1.0, 0.75, 0.5, 0.3,
                                                                                         0.1, 0.1])


@pytest.mark.parametrize(("doc", "error"), [
    ({"kind": "linear", "end": 0.0}, "a linear schedule takes `end` and `over`"),
    ({"kind": "cosine", "over": 10, "end": 0.0, "points": [[5, 1.0]]}, "not points"),
    ({"kind": "piecewise", "end": 0.0, "over": 5}, "a piecewise schedule takes `points`"),
    ({"kind": "piecewise", "points": [[10, 1.0], [10, 0.5]]}, "strictly increasing units, got"),
    ({"kind": "linear", "end": 0.0, "over": 0}, "greater than or equal to 1"),
])
def test_a_schedule_missing_what_its_kind_needs_is_refused(doc: dict, error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        Schedule.model_validate(doc)


def test_only_fields_the_algorithm_has_and_reads_per_update_are_schedulable() -> None:
    linear = {"kind": "linear", "end": 0.0, "over": 10}
    PPOParams(schedules={"learning_rate": linear, "clip_range": linear, "entropy_coef": linear})
    with pytest.raises(ValidationError, match=r"sac has no schedulable field 'clip_range': schedule learning_rate"):
        SACParams(schedules={"clip_range": linear})
    with pytest.raises(ValidationError, match=r"ppo has no schedulable field 'gamma'"):
        PPOParams(schedules={"gamma": linear})
    with pytest.raises(ValidationError, match=r"algo.schedules.clip_ratio: algo.clip_ratio is null"):
        ImpalaParams(schedules={"clip_ratio": linear})
    ImpalaParams(clip_ratio=0.2, schedules={"clip_ratio": linear})


@pytest.mark.parametrize("doc", [
    {"kind": "linear", "end": 0.0, "over": 100},
    {"kind": "cosine", "end": 0.0, "over": 100},
    {"kind": "piecewise", "points": [[100, 0.0]]},
])
def test_a_schedule_taking_over_mid_run_continues_from_the_value_reached(doc: dict) -> None:
    """A live change at 400 units, when the old schedule had reached 0.6: the new shape runs from (400, 0.6), not
    from the configured 1.0 at 0 (which would jump the value to the new schedule's 400th unit: its end)."""
    new = Schedule.model_validate(doc).taking_over(current=0.6, at=400)
    assert (new.begin, new.start) == (400, 0.6)
    assert new.value(1.0, 400) == pytest.approx(0.6)
    assert 0.0 < new.value(1.0, 450) < 0.6
    assert new.value(1.0, 500) == pytest.approx(0.0) and new.value(1.0, 900) == pytest.approx(0.0)
    assert new.value(1.0, 100) == pytest.approx(0.6)  # before its begin (a learner a poll behind): its start


def test_a_begin_or_start_given_with_the_change_is_kept() -> None:
    new = Schedule.model_validate({"kind": "linear", "end": 0.0, "over": 100, "start": 2.0}).taking_over(0.6, 400)
    assert (new.begin, new.start) == (400, 2.0)
    again = Schedule.model_validate({"kind": "linear", "end": 0.0, "over": 100, "begin": 0}).taking_over(0.6, 400)
    assert (again.begin, again.start) == (0, 0.6)


def test_the_rest_of_a_piecewise_schedule_scales_and_a_finished_or_zero_one_holds_the_new_value() -> None:
    piecewise = Schedule.model_validate({"kind": "piecewise", "points": [[100, 0.5], [300, 0.1]]})
    rest = piecewise.scaled_rest(1.0, at=200, new_value=0.6)  # 0.3 reached: factor 2
    assert rest.points == ((100.0, pytest.approx(0.2)),) and (rest.begin, rest.start) == (200, 0.6)
    assert rest.value(1.0, 250) == pytest.approx(0.4) and rest.value(1.0, 900) == pytest.approx(0.2)
    done = piecewise.scaled_rest(1.0, at=400, new_value=0.05)
    assert done.value(1.0, 400) == done.value(1.0, 10_000) == pytest.approx(0.05)
    zero = Schedule.model_validate({"kind": "linear", "end": 0.0, "over": 100}).scaled_rest(1.0, 200, 0.3)
    assert zero.value(1.0, 200) == zero.value(1.0, 900) == pytest.approx(0.3)
