"""coordinator.state.ratelimit.RateLimiter: warm-up, the samples-per-insert band on both sides, achieved ratio."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlfleet.coordinator.state.ratelimit import RateLimiter


def test_cannot_sample_below_min_size() -> None:
    rl = RateLimiter(min_size=100, samples_per_insert=4.0, tolerance=1000)
    assert not rl.can_sample(1)
    rl.inserted = 99
    assert not rl.can_sample(1)  # the band would allow it, the warm-up does not
    assert not rl.collectors_ahead()
    rl.inserted = 100
    assert rl.can_sample(1)


def test_sampling_band_lower_side() -> None:
    # spi=2, tolerance=10: the learner may run ahead by spi*tolerance = 20 sampled transitions
    rl = RateLimiter(min_size=10, samples_per_insert=2.0, tolerance=10)
    rl.inserted = 10  # diff = 0
    assert rl.can_sample(20)  # 0 - 20 >= -20
    assert not rl.can_sample(21)
    rl.sampled = 20  # diff = -20
    assert rl.can_sample(0)
    assert not rl.can_sample(1)
    rl.inserted += 1  # diff = -18: one insert buys spi samples
    assert rl.can_sample(2)
    assert not rl.can_sample(3)


def test_collectors_band_upper_side() -> None:
    rl = RateLimiter(min_size=10, samples_per_insert=2.0, tolerance=10)
    rl.inserted = 20  # diff = 20 == spi * tolerance: not yet ahead
    assert not rl.collectors_ahead()
    rl.inserted = 21  # diff = 22 > 20
    assert rl.collectors_ahead()
    rl.sampled = 2  # diff = 20
    assert not rl.collectors_ahead()


def test_collectors_never_ahead_before_warm_up() -> None:
    rl = RateLimiter(min_size=1000, samples_per_insert=1.0, tolerance=1)
    rl.inserted = 999
    assert not rl.collectors_ahead()
    rl.inserted = 1002
    assert rl.collectors_ahead()


def test_achieved_ratio() -> None:
    rl = RateLimiter(min_size=100, samples_per_insert=8.0, tolerance=50)
    assert rl.achieved_ratio() == 0.0
    rl.inserted, rl.sampled = 100, 0
    assert rl.achieved_ratio() == 0.0  # no warm transitions yet: no division by zero
    rl.inserted, rl.sampled = 150, 200
    assert rl.achieved_ratio() == pytest.approx(4.0)
    rl.inserted, rl.sampled = 50, 10  # below warm-up
    assert rl.achieved_ratio() == 0.0


@settings(max_examples=100, derandomize=True, deadline=None)
@given(
    min_size=st.integers(1, 500),
    spi=st.sampled_from([0.5, 1.0, 4.0, 32.0]),
    tolerance=st.integers(1, 2000),
    batch=st.integers(1, 256),
    inserts=st.lists(st.integers(1, 300), min_size=1, max_size=60),
)
def test_greedy_learner_stays_in_band(min_size: int, spi: float, tolerance: int, batch: int,
                                      inserts: list[int]) -> None:
    """Insert chunks, sample as much as allowed after each: the ratio never leaves the band."""
    rl = RateLimiter(min_size, spi, tolerance)
    for n in inserts:
        rl.inserted += n
        while rl.can_sample(batch):
            rl.sampled += batch
        diff = (rl.inserted - min_size) * spi - rl.sampled
        if rl.inserted >= min_size:
            assert diff >= -spi * tolerance  # the learner never overshoots the lower edge
            # a greedy learner keeps the collectors inside the band whenever the batch fits in it
            if batch <= spi * tolerance:
                assert not rl.collectors_ahead()
        else:
            assert rl.sampled == 0
