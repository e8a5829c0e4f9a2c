"""coordinator.replay.sumtree.SumTree: exact internal sums, proportional sampling, never a zero leaf."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlfleet.coordinator.replay.sumtree import SumTree
from tests.support.repo import REPO

# ----- helpers ----------------------------------------------------------------------------------------------

LEAF_VALUES = st.one_of(
    st.just(0.0),
    st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False),  # subnormals included
    st.integers(1, 5).map(float),
)


@st.composite
def trees(draw: st.DrawFn) -> tuple[SumTree, np.ndarray]:
    """A tree after several batched `set` calls (duplicates, zeros, empty batches) and the leaves it must hold."""
    capacity = draw(st.integers(1, 70))
    index = st.integers(0, capacity - 1)
    batches = draw(st.lists(st.lists(st.tuples(index, LEAF_VALUES), max_size=24), min_size=1, max_size=6))
    tree, expected = SumTree(capacity), np.zeros(capacity)
    for batch in batches:
        idx = np.array([i for i, _ in batch], np.int64)
        values = np.array([v for _, v in batch], np.float64)
        tree.set(idx, values)
        for i, v in batch:  # sequential reference: the last occurrence of an index wins
            expected[i] = v
    return tree, expected


def snapshot(tree: SumTree) -> tuple[np.ndarray, np.ndarray]:
    return tree._sums.copy(), tree._mins.copy()


def assert_consistent(tree: SumTree, expected: np.ndarray) -> None:
    assert np.array_equal(tree.get(np.arange(tree.capacity)), expected)
    assert math.isclose(tree.total, math.fsum(expected), rel_tol=1e-12, abs_tol=0.0)
    positive = expected[expected > 0]
    assert tree.min == (positive.min() if positive.size else math.inf)
    size, sums, mins = tree._size, tree._sums, tree._mins
    assert np.array_equal(sums[size + tree.capacity:], np.zeros(size - tree.capacity))  # padding stays empty
    assert np.array_equal(mins[size:size + tree.capacity], np.where(expected > 0, expected, np.inf))
    k = np.arange(1, size)
    assert np.array_equal(sums[k], sums[2 * k] + sums[2 * k + 1])  # exactly: recomputed, no drift
    assert np.array_equal(mins[k], np.minimum(mins[2 * k], mins[2 * k + 1]))


def assert_brackets(expected: np.ndarray, targets: np.ndarray, found: np.ndarray) -> None:
    """Each found leaf is positive and its [prefix, prefix + leaf) holds the target, up to rounding."""
    total = math.fsum(expected)
    tol = 1e-12 * total
    assert found.dtype == np.int64
    assert np.all((found >= 0) & (found < len(expected)))
    for t, i in zip(targets.tolist(), found.tolist(), strict=True):
        assert expected[i] > 0, (t, i)
        prefix = math.fsum(expected[:i])
        assert prefix - tol <= t < prefix + expected[i] + tol, (t, i, prefix, expected[i])


# ----- properties -------------------------------------------------------------------------------------------


@settings(max_examples=200, derandomize=True, deadline=None)
@given(trees())
def test_sums_mins_and_leaves_match_the_sets(tree_and_leaves: tuple[SumTree, np.ndarray]) -> None:
    tree, expected = tree_and_leaves
    assert_consistent(tree, expected)
    tree.set(np.arange(tree.capacity), np.zeros(tree.capacity))  # no residue left behind by earlier values
    assert tree.total == 0.0
    assert tree.min == math.inf
    with pytest.raises(ValueError):
        tree.find(np.zeros(1))


@settings(max_examples=200, derandomize=True, deadline=None)
@given(trees(), st.lists(st.floats(min_value=0.0, max_value=1.0, exclude_max=True), max_size=30))
def test_find_brackets_the_target_and_never_returns_a_zero_leaf(tree_and_leaves: tuple[SumTree, np.ndarray],
                                                                 fractions: list[float]) -> None:
    tree, expected = tree_and_leaves
    if tree.total == 0:
        with pytest.raises(ValueError):
            tree.find(np.array([0.0]))
        return
    total = tree.total
    edges = [0.0, np.nextafter(total, 0.0), total * (1 - 1e-16), total * (1 - 2.0 ** -53)]
    targets = np.array([f * total for f in fractions] + edges)
    assert_brackets(expected, targets, tree.find(targets))
    beyond = np.array([total, total * 2, np.nextafter(total, np.inf), -1.0, -0.0])  # out of range: still positive
    assert np.all(expected[tree.find(beyond)] > 0)


@settings(max_examples=100, derandomize=True, deadline=None)
@given(trees(), st.integers(0, 2 ** 32 - 1), st.integers(0, 300))
def test_sample_returns_positive_leaves_in_range(tree_and_leaves: tuple[SumTree, np.ndarray], seed: int,
                                                 n: int) -> None:
    tree, expected = tree_and_leaves
    rng = np.random.default_rng(seed)
    if tree.total == 0:
        with pytest.raises(ValueError):
            tree.sample(rng, n)
        return
    drawn = tree.sample(rng, n)
    assert drawn.dtype == np.int64 and drawn.shape == (n,)
    assert np.all((drawn >= 0) & (drawn < tree.capacity))
    assert np.all(expected[drawn] > 0)


# ----- rounding at the edges --------------------------------------------------------------------------------


def test_target_rounded_past_a_right_child_is_redirected_to_a_positive_leaf() -> None:
    tree = SumTree(4)
    tree.set(np.arange(4), np.array([0.1, 0.0, 0.2, 0.0]))
    total = tree.total                                       # fl(0.1 + 0.2) = 0.30000000000000004
    assert total - 0.1 >= 0.2                                # so t - left overshoots the right child's 0.2 ...
    unguarded = tree._descend(np.array([total]), guarded=False)
    assert tree.get(unguarded)[0] == 0.0                     # ... and a plain descent lands on the 0 leaf 3
    assert tree.find(np.array([total])).tolist() == [2]
    assert tree.find(np.array([np.nextafter(total, 0.0), total * (1 - 1e-16)])).tolist() == [2, 2]


def test_targets_at_the_top_of_a_tree_with_interleaved_zeros() -> None:
    rng = np.random.default_rng(7)
    capacity = 1000
    values = np.zeros(capacity)
    values[::2] = rng.random(capacity // 2) * 10 ** rng.uniform(-8, 8, capacity // 2)  # odd leaves empty
    tree = SumTree(capacity)
    tree.set(np.arange(capacity), values)
    total = tree.total
    top = total * (1 - np.arange(2000) * 2.0 ** -53)        # every representable step just below the total
    targets = np.concatenate([top, [np.nextafter(total, 0.0), total * (1 - 1e-16)], rng.random(5000) * total])
    found = tree.find(targets)
    assert np.all(values[found] > 0)
    assert np.all(values[tree.sample(rng, 100_000)] > 0)


# ----- distribution -----------------------------------------------------------------------------------------

# Chi-square critical value for 19 degrees of freedom (20 categories) at significance 0.001 (scipy is not a
# dependency, so it is tabulated: P(chi2_19 > 43.820) = 0.001).
CHI2_CRITICAL_DF19_P001 = 43.820


def chi_square(observed: np.ndarray, expected: np.ndarray) -> float:
    return float(np.sum((observed - expected) ** 2 / expected))


def test_sample_matches_the_leaf_proportions_chi_square() -> None:
    capacity = 50                                            # not a power of two: 14 padding leaves
    positions = np.random.default_rng(123).choice(capacity, 20, replace=False)
    weights = 0.05 + 0.37 * np.arange(1, 21)                # 20 distinct positive values
    tree = SumTree(capacity)
    tree.set(np.arange(capacity), np.ones(capacity))        # every leaf positive once ...
    tree.set(np.arange(capacity), np.zeros(capacity))       # ... then zeroed ...
    tree.set(positions, weights)                            # ... and 20 of them made positive again
    n = 200_000
    drawn = tree.sample(np.random.default_rng(2024), n)
    counts = np.bincount(drawn, minlength=capacity)
    assert counts.sum() == n
    assert counts[np.setdiff1d(np.arange(capacity), positions)].sum() == 0  # zero leaves are never drawn
    observed = counts[positions].astype(np.float64)
    proportional = n * weights / weights.sum()
    uniform = np.full(20, n / 20)
    assert chi_square(observed, proportional) < CHI2_CRITICAL_DF19_P001
    # the same test does reject a wrong distribution, both ways round
    assert chi_square(observed, uniform) > CHI2_CRITICAL_DF19_P001
    uniform_draws = np.bincount(np.random.default_rng(2024).integers(0, 20, n), minlength=20).astype(np.float64)
    assert chi_square(uniform_draws, proportional) > CHI2_CRITICAL_DF19_P001


# ----- bad input --------------------------------------------------------------------------------------------


def populated(capacity: int = 5) -> SumTree:
    tree = SumTree(capacity)
    tree.set(np.arange(capacity), np.arange(1, capacity + 1, dtype=np.float64))
    return tree


@pytest.mark.parametrize("bad", [-1.0, -1e-300, math.nan, math.inf, -math.inf])
def test_bad_values_raise_and_leave_the_tree_unchanged(bad: float) -> None:
    tree = populated()
    before = snapshot(tree)
    with pytest.raises(ValueError):
        tree.set(np.array([0, 1, 2]), np.array([9.0, bad, 9.0]))
    after = snapshot(tree)
    assert np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])


@pytest.mark.parametrize("idx", [[0, -1], [0, 5], [0, 6], [7, 0], [2 ** 40, 0], [0.0, 1.0]],
                         ids=["negative", "capacity", "padding-6", "padding-7", "huge", "float"])
def test_bad_indices_raise_and_leave_the_tree_unchanged(idx: list) -> None:
    tree = populated(capacity=5)                            # leaves 5..7 exist as padding but are not valid
    before = snapshot(tree)
    with pytest.raises(ValueError):
        tree.set(np.array(idx), np.array([9.0, 9.0]))
    after = snapshot(tree)
    assert np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])
    with pytest.raises(ValueError):
        tree.get(np.array(idx))


def test_mismatched_lengths_raise_and_leave_the_tree_unchanged() -> None:
    tree = populated()
    before = snapshot(tree)
    with pytest.raises(ValueError):
        tree.set(np.array([0, 1, 2]), np.array([9.0, 9.0]))
    after = snapshot(tree)
    assert np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])


@pytest.mark.parametrize("capacity", [0, -3])
def test_capacity_below_one_raises(capacity: int) -> None:
    with pytest.raises(ValueError):
        SumTree(capacity)


def test_empty_tree_refuses_to_search_and_rejects_nan_targets() -> None:
    tree = SumTree(8)
    assert tree.total == 0.0 and tree.min == math.inf
    with pytest.raises(ValueError):
        tree.find(np.array([0.0]))
    with pytest.raises(ValueError):
        tree.sample(np.random.default_rng(0), 4)
    tree.set(np.array([3]), np.array([1.0]))
    with pytest.raises(ValueError):
        tree.find(np.array([0.5, math.nan]))


# ----- shapes and sizes -------------------------------------------------------------------------------------


def test_duplicate_indices_last_occurrence_wins() -> None:
    tree = SumTree(6)
    tree.set(np.array([3, 3, 3, 1, 5, 1]), np.array([1.0, 2.0, 0.0, 4.0, 7.0, 6.0]))
    assert tree.get(np.arange(6)).tolist() == [0.0, 6.0, 0.0, 0.0, 0.0, 7.0]
    assert tree.total == 13.0 and tree.min == 6.0
    tree.set(np.array([5, 5]), np.array([0.0, 2.5]))
    assert tree.total == 8.5 and tree.min == 2.5
    tree.set(np.array([], np.int64), np.array([]))          # an empty batch is a no-op
    assert tree.total == 8.5


@pytest.mark.parametrize("capacity", [1, 2, 3, 5, 1000, 1025])
def test_any_capacity_samples_only_its_positive_leaves(capacity: int) -> None:
    tree = SumTree(capacity)
    assert tree.capacity == capacity
    last = capacity - 1
    tree.set(np.array([last]), np.array([2.5]))
    assert tree.total == 2.5 and tree.min == 2.5
    assert tree.find(np.array([0.0, 1.0, 2.4999])).tolist() == [last] * 3
    drawn = tree.sample(np.random.default_rng(0), 64)
    assert drawn.tolist() == [last] * 64
    assert tree.sample(np.random.default_rng(0), 0).shape == (0,)
    if capacity > 1:
        tree.set(np.array([0]), np.array([2.5]))
        assert set(tree.sample(np.random.default_rng(0), 256).tolist()) == {0, last}


def test_memory_is_under_40_bytes_per_leaf_at_a_million() -> None:
    tree = SumTree(1_000_000)
    assert 0 < tree.nbytes < 40 * 1_000_000


def test_importing_the_sumtree_loads_no_torch() -> None:
    script = "import sys, coordinator.replay.sumtree; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_ring_of_overwriting_chunks_keeps_every_internal_node_exact() -> None:
    """add() zeroes overwritten leaves without refreshing their ancestors and lets its own set() do it once:
    every node must still be exactly the sum (and min) of its children, also across the ring's wrap."""
    from rlfleet.coordinator.replay.buffer import Entry, ReplayBuffer
    from rlfleet.shared.config.run_config import ReplayConfig, SamplingConfig
    from tests.support.replay import tree_of

    buffer = ReplayBuffer("r", ReplayConfig(capacity_transitions=1000, min_transitions=1, sampler="prioritized"),
                          SamplingConfig())
    rng = np.random.default_rng(0)
    for i in range(200):
        rows = int(rng.integers(1, 40)) * 2
        buffer.add(Entry(f"c{i}", f"chunks/t/c{i}.msgpack", "0" * 64, rows, 0, 2, (rows - 1,), ()))
        if i % 7 == 0 and buffer.items:
            drawn = buffer.sample(rng, 8, 0.4)
            buffer.update_priorities(drawn.ids, rng.random(len(drawn.ids)) + 0.1)
        tree = tree_of(buffer)
        assert tree is not None
        size = tree._size
        for node in range(size - 1, 0, -1):
            assert tree._sums[node] == tree._sums[2 * node] + tree._sums[2 * node + 1]
            assert tree._mins[node] == min(tree._mins[2 * node], tree._mins[2 * node + 1])
