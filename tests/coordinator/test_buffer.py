"""coordinator.buffer.ReplayBuffer: FIFO eviction by transitions and sampling uniform over transitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.buffer import Entry, ReplayBuffer


def entry(chunk_id: str, transitions: int, version: int = 0) -> Entry:
    return Entry(chunk_id, f"chunks/collector-0/{chunk_id}.msgpack", "0" * 64, transitions, version)


# ----- eviction ---------------------------------------------------------------------------------------------


def test_add_without_eviction_keeps_insertion_order() -> None:
    buf = ReplayBuffer("replay-0", capacity_transitions=100)
    for i, n in enumerate([10, 20, 30]):
        assert buf.add(entry(f"c{i}", n)) == []
    assert buf.transitions == 60
    assert len(buf) == 3
    assert [e.chunk_id for e in buf.entries()] == ["c0", "c1", "c2"]
    assert "c1" in buf and "c9" not in buf
    assert buf.evicted_chunks == 0


def test_exactly_at_capacity_does_not_evict() -> None:
    buf = ReplayBuffer("replay-0", capacity_transitions=30)
    buf.add(entry("a", 10))
    assert buf.add(entry("b", 20)) == []
    assert buf.transitions == 30 and len(buf) == 2


def test_fifo_eviction_returns_evicted_oldest_first() -> None:
    buf = ReplayBuffer("replay-0", capacity_transitions=50)
    for i in range(5):
        buf.add(entry(f"c{i}", 10))
    evicted = buf.add(entry("c5", 25))  # 75 > 50: drop c0, c1, c2 (-> 45)
    assert [e.chunk_id for e in evicted] == ["c0", "c1", "c2"]
    assert evicted[0] == entry("c0", 10)  # the full entry comes back, payload path included
    assert [e.chunk_id for e in buf.entries()] == ["c3", "c4", "c5"]
    assert buf.transitions == 45
    assert buf.evicted_chunks == 3
    assert "c0" not in buf


def test_never_evicts_the_entry_just_added_even_if_oversized() -> None:
    buf = ReplayBuffer("replay-0", capacity_transitions=10)
    buf.add(entry("a", 4))
    buf.add(entry("b", 4))
    evicted = buf.add(entry("huge", 100))
    assert [e.chunk_id for e in evicted] == ["a", "b"]
    assert [e.chunk_id for e in buf.entries()] == ["huge"]
    assert buf.transitions == 100  # above capacity, but the newest entry stays
    evicted = buf.add(entry("next", 1))
    assert [e.chunk_id for e in evicted] == ["huge"]
    assert buf.transitions == 1


def test_first_entry_larger_than_capacity_is_kept() -> None:
    buf = ReplayBuffer("replay-0", capacity_transitions=5)
    assert buf.add(entry("big", 50)) == []
    assert len(buf) == 1 and buf.transitions == 50
    entries, index, offsets = buf.sample(np.random.default_rng(0), 100)
    assert [e.chunk_id for e in entries] == ["big"]
    assert set(index.tolist()) == {0}
    assert offsets.min() >= 0 and offsets.max() < 50


def test_re_adding_a_chunk_id_is_refused_and_keeps_transitions_consistent() -> None:
    buf = ReplayBuffer("replay-0", capacity_transitions=100)
    buf.add(entry("a", 10))
    with pytest.raises(ValueError, match="already in buffer"):
        buf.add(entry("a", 10))
    assert buf.transitions == sum(e.transitions for e in buf.entries()) == 10


# ----- sampling ---------------------------------------------------------------------------------------------


def test_sample_empty_buffer_raises() -> None:
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer("replay-0", 10).sample(np.random.default_rng(0), 1)


def test_sample_shapes_and_bounds() -> None:
    buf = ReplayBuffer("replay-0", capacity_transitions=1000)
    sizes = [1, 7, 64, 3, 200, 2]
    for i, n in enumerate(sizes):
        buf.add(entry(f"c{i}", n))
    rng = np.random.default_rng(123)
    entries, index, offsets = buf.sample(rng, 5000)
    assert index.shape == offsets.shape == (5000,)
    assert index.dtype == np.int64 and offsets.dtype == np.int64
    ids = [e.chunk_id for e in entries]
    assert len(ids) == len(set(ids))  # distinct
    assert set(ids) <= {f"c{i}" for i in range(len(sizes))}
    assert index.min() >= 0 and index.max() < len(entries)
    assert set(index.tolist()) == set(range(len(entries)))  # every returned entry is actually used
    sizes_of = np.array([entries[i].transitions for i in index])
    assert (offsets >= 0).all() and (offsets < sizes_of).all()
    assert len(entries) == len(sizes)  # 5000 draws hit every chunk, even the 1-transition one


def test_sample_is_deterministic_for_a_seed() -> None:
    buf = ReplayBuffer("replay-0", capacity_transitions=1000)
    for i in range(10):
        buf.add(entry(f"c{i}", i + 1))
    a = buf.sample(np.random.default_rng(7), 100)
    b = buf.sample(np.random.default_rng(7), 100)
    assert a[0] == b[0]
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(a[2], b[2])


def test_sample_index_refreshes_after_eviction() -> None:
    buf = ReplayBuffer("replay-0", capacity_transitions=20)
    buf.add(entry("old", 10))
    buf.add(entry("mid", 10))
    buf.sample(np.random.default_rng(0), 10)  # builds the cached index
    buf.add(entry("new", 10))  # evicts "old"
    entries, _, offsets = buf.sample(np.random.default_rng(0), 2000)
    assert {e.chunk_id for e in entries} == {"mid", "new"}
    assert offsets.max() < 10


# Wilson-Hilferty approximation of the chi-square quantile (scipy is not a dependency). It is accurate to
# well under 1% for df >= 5, which is far below the margin that matters at this significance level.
ALPHA = 0.001
Z_999 = 3.090232306167813  # standard normal quantile at 1 - ALPHA


def chi2_critical(df: int, z: float = Z_999) -> float:
    k = 2.0 / (9.0 * df)
    return df * (1.0 - k + z * math.sqrt(k)) ** 3


def chi2_statistic(observed: np.ndarray, expected: np.ndarray) -> float:
    return float(((observed - expected) ** 2 / expected).sum())


def test_chi2_critical_value_approximation() -> None:
    # reference quantiles at alpha = 0.001 from standard tables
    assert chi2_critical(9) == pytest.approx(27.877, rel=0.01)
    assert chi2_critical(59) == pytest.approx(98.324, rel=0.01)


def test_sampling_is_uniform_over_transitions_chi_square() -> None:
    """Chi-square goodness of fit at significance level ALPHA = 0.001, fixed seed (so no flakiness).

    Two checks: per chunk (drawn in proportion to its size) and per individual transition (chunk, offset).
    A sampler that picked chunks uniformly, or offsets not uniform inside a chunk, gives statistics in the
    thousands here, far above the critical values (~28 and ~98).
    """
    sizes = [1, 2, 3, 4, 5, 6, 7, 8, 10, 14]  # 60 transitions, very unequal chunks
    buf = ReplayBuffer("replay-0", capacity_transitions=10_000)
    for i, n in enumerate(sizes):
        buf.add(entry(f"c{i}", n))
    total = sum(sizes)
    draws = 120_000
    entries, index, offsets = buf.sample(np.random.default_rng(20240601), draws)
    chunk_of_draw = np.array([int(entries[i].chunk_id[1:]) for i in index])

    per_chunk = np.bincount(chunk_of_draw, minlength=len(sizes)).astype(float)
    expected_chunk = draws * np.array(sizes, dtype=float) / total
    assert chi2_statistic(per_chunk, expected_chunk) < chi2_critical(len(sizes) - 1)

    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    flat = starts[chunk_of_draw] + offsets
    assert flat.min() >= 0 and flat.max() < total
    per_transition = np.bincount(flat, minlength=total).astype(float)
    assert (per_transition > 0).all()
    assert chi2_statistic(per_transition, np.full(total, draws / total)) < chi2_critical(total - 1)


def test_chi_square_check_has_power_against_per_chunk_uniform_sampling() -> None:
    """Sanity check of the test itself: sampling chunks uniformly (the classic bug) is clearly rejected."""
    sizes = np.array([1, 2, 3, 4, 5, 6, 7, 8, 10, 14])
    rng = np.random.default_rng(1)
    draws = 120_000
    wrong = np.bincount(rng.integers(0, len(sizes), draws), minlength=len(sizes)).astype(float)
    expected = draws * sizes / sizes.sum()
    assert chi2_statistic(wrong, expected) > 10 * chi2_critical(len(sizes) - 1)


# ----- property test ----------------------------------------------------------------------------------------


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    capacity=st.integers(1, 200),
    sizes=st.lists(st.integers(1, 60), min_size=1, max_size=40),
    draws=st.integers(1, 64),
    seed=st.integers(0, 2**32 - 1),
)
def test_add_and_sample_invariants(capacity: int, sizes: list[int], draws: int, seed: int) -> None:
    buf = ReplayBuffer("replay-0", capacity_transitions=capacity)
    rng = np.random.default_rng(seed)
    model: list[Entry] = []  # reference FIFO
    total_evicted = 0
    for i, n in enumerate(sizes):
        new = entry(f"c{i}", n)
        evicted = buf.add(new)
        model.append(new)
        expected_evicted = []
        while sum(e.transitions for e in model) > capacity and len(model) > 1:
            expected_evicted.append(model.pop(0))
        total_evicted += len(evicted)

        assert evicted == expected_evicted
        assert buf.entries() == model
        assert new in buf.entries()  # the newest is never evicted
        assert buf.transitions == sum(e.transitions for e in buf.entries())
        assert buf.transitions <= capacity or len(buf) == 1
        assert len(buf) <= max(1, capacity)
        assert buf.evicted_chunks == total_evicted

        picked, index, offsets = buf.sample(rng, draws)
        assert len(index) == len(offsets) == draws
        assert all(e in model for e in picked)
        assert index.min() >= 0 and index.max() < len(picked)
        for k in range(draws):
            assert 0 <= offsets[k] < picked[index[k]].transitions
    assert total_evicted + len(buf) == len(sizes)
