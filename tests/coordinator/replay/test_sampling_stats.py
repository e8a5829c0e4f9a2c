"""Statistical and property checks of what ReplayBuffer.sample draws.

Every chi-square test here is a goodness-of-fit test at significance level 0.001 with a fixed seed, so it is
deterministic; each is paired with a check that the same statistic rejects a plausible wrong distribution,
so the test can actually fail. scipy is not a dependency: the critical values come from
`tests.support.chisquare.chi2_critical`, checked against tabulated quantiles below.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlfleet.coordinator.replay.buffer import ReplayBuffer
from tests.support.chisquare import chi2_critical, chi2_sf, chi2_statistic
from tests.support.replay import brute_episodes, brute_windows, entry, item_ids, leaves, make_buffer

SIGNIFICANCE = 0.001
DRAWS = 200_000


def counts_by_id(ids: np.ndarray, categories: np.ndarray) -> np.ndarray:
    """How often each id in `categories` was drawn; draws outside `categories` are a failure."""
    assert np.isin(ids, categories).all()
    return np.array([np.count_nonzero(ids == c) for c in categories.tolist()], np.float64)


def test_chi2_critical_values_match_tables() -> None:
    # upper 0.001 quantiles of the chi-square distribution, from standard tables
    table = {1: 10.828, 2: 13.816, 9: 27.877, 10: 29.588, 19: 43.820, 20: 45.315, 30: 59.703, 100: 149.449}
    for df, value in table.items():
        assert chi2_critical(df, SIGNIFICANCE) == pytest.approx(value, abs=1.5e-3)
    assert chi2_sf(3.841458820694124, 1) == pytest.approx(0.05, rel=1e-9)
    assert chi2_critical(5, 0.05) == pytest.approx(11.0705, abs=1e-4)


# ----- prioritized --------------------------------------------------------------------------------------------


def prioritized_buffer() -> tuple[ReplayBuffer, dict[int, float]]:
    """A wrapped ring of items with distinct priorities; returns the buffer and the expected leaf per live id,
    computed here from the definition (priority + epsilon) ** alpha, new items at max priority ** alpha."""
    alpha, eps = 0.6, 1e-3
    buf = make_buffer(48, sampler="prioritized", alpha=alpha, priority_epsilon=eps)
    buf.add(entry("a", 20, num_envs=2))
    buf.add(entry("b", 18, num_envs=3))
    buf.add(entry("c", 12))                          # ids 38..49: overwrites ids 0 and 1
    live = item_ids(buf)
    assert live.tolist() == list(range(2, 50))
    priorities = np.random.default_rng(5).permutation(np.linspace(0.02, 6.0, len(live)))
    # ids 0 and 1 were overwritten: their (huge) priorities must not land on the rows now in their slots
    ids = np.concatenate([[0, 1], live])
    assert buf.update_priorities(ids, np.concatenate([[500.0, 500.0], priorities])) == len(live)
    expected = {int(i): (p + eps) ** alpha for i, p in zip(live, priorities, strict=True)}
    buf.add(entry("d", 4))                           # ids 50..53 overwrite ids 2..5, enter at max priority
    for i in range(2, 6):
        del expected[i]
    for i in range(50, 54):
        expected[i] = (max(priorities) + eps) ** alpha
    assert sorted(expected) == item_ids(buf).tolist()
    return buf, expected


def test_prioritized_frequencies_follow_priority_to_the_alpha_chi_square() -> None:
    """Chi-square goodness of fit at significance 0.001 with 200k draws (fixed seed)."""
    buf, expected_leaf = prioritized_buffer()
    ids = np.array(sorted(expected_leaf))
    leaf = np.array([expected_leaf[i] for i in ids.tolist()])
    drawn = buf.sample(np.random.default_rng(20240601), DRAWS, 0.4)
    assert len(drawn.ids) == DRAWS
    observed = counts_by_id(drawn.ids, ids)
    critical = chi2_critical(len(ids) - 1, SIGNIFICANCE)
    assert chi2_statistic(observed, DRAWS * leaf / leaf.sum()) < critical
    # the same statistic rejects the plausible wrong answers: alpha ignored (leaf = priority) and uniform
    priority = leaf ** (1 / 0.6)
    assert chi2_statistic(observed, DRAWS * priority / priority.sum()) > critical
    assert chi2_statistic(observed, np.full(len(ids), DRAWS / len(ids))) > critical
    # ... and a sample from the wrong distribution is rejected against the right expectation
    wrong = np.random.default_rng(1).choice(ids, DRAWS, p=priority / priority.sum())
    assert chi2_statistic(counts_by_id(wrong, ids), DRAWS * leaf / leaf.sum()) > critical


def test_prioritized_tree_leaves_are_the_expected_leaves() -> None:
    buf, expected_leaf = prioritized_buffer()
    ids = np.array(sorted(expected_leaf))
    np.testing.assert_allclose(leaves(buf)[ids % buf.capacity], [expected_leaf[i] for i in ids.tolist()],
                               rtol=1e-12)
    others = np.setdiff1d(np.arange(buf.capacity), ids % buf.capacity)
    assert np.all(leaves(buf)[others] == 0)


@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
def test_importance_weights_match_the_formula(beta: float) -> None:
    """w_i = (N P(i))**-beta / max_j (N P(j))**-beta over all live items, P(i) = leaf_i / total."""
    buf, expected_leaf = prioritized_buffer()
    buf.update_priorities(np.array([7]), np.array([0.0]))   # one item far below the rest (leaf = eps**alpha)
    expected_leaf[7] = (0.0 + 1e-3) ** 0.6
    ids = np.array(sorted(expected_leaf))
    leaf = np.array([expected_leaf[i] for i in ids.tolist()])
    n, total = len(ids), leaf.sum()
    formula = dict(zip(ids.tolist(), (n * leaf / total) ** -beta / np.max((n * leaf / total) ** -beta),
                       strict=True))
    drawn = buf.sample(np.random.default_rng(11), 40, beta)
    assert 7 not in drawn.ids                      # the rare item is not in this batch ...
    want = np.array([formula[i] for i in drawn.ids.tolist()])
    np.testing.assert_allclose(drawn.weights, want, rtol=1e-12)
    if beta == 0:
        assert np.all(drawn.weights == 1)
        return
    # ... so a weight normalised by the batch maximum instead of the buffer's would differ
    assert np.all(want < 1) and not np.allclose(want / want.max(), want)
    assert len(np.unique(np.round(want, 12))) > 1
    # the formula holds over many draws too, and the largest weight belongs to the rarest item
    many = buf.sample(np.random.default_rng(12), 20_000, beta)
    np.testing.assert_allclose(many.weights, [formula[i] for i in many.ids.tolist()], rtol=1e-12)
    assert 7 in many.ids and many.weights[many.ids == 7][0] == pytest.approx(1.0)


def test_uniform_sampler_weights_are_one() -> None:
    buf = make_buffer(30)
    buf.add(entry("a", 30))
    assert np.all(buf.sample(np.random.default_rng(0), 1000, 1.0).weights == 1.0)


# ----- uniform ----------------------------------------------------------------------------------------------------


def test_uniform_over_transitions_after_partial_ring_overwrite_chi_square() -> None:
    """Chi-square goodness of fit at significance 0.001, 200k draws, fixed seed. The chunks have very
    different sizes and the oldest one is half overwritten, so a sampler that picked a chunk first (or
    counted overwritten rows) would be far off."""
    buf = make_buffer(60)
    sizes = [(20, 2), (6, 1), (9, 3), (2, 1), (21, 1), (12, 4)]     # 70 rows in 60 slots
    for i, (rows, envs) in enumerate(sizes):
        buf.add(entry(f"c{i}", rows, num_envs=envs))
    assert buf.transitions == 60 and len(buf) == 6
    ids = np.arange(10, 70)                         # ids 0..9 (half of c0) were overwritten
    assert item_ids(buf).tolist() == ids.tolist()
    drawn = buf.sample(np.random.default_rng(7), DRAWS, 1.0)
    observed = counts_by_id(drawn.ids, ids)
    critical = chi2_critical(len(ids) - 1, SIGNIFICANCE)
    uniform = np.full(len(ids), DRAWS / len(ids))
    assert chi2_statistic(observed, uniform) < critical
    # power: picking a live chunk uniformly and then one of its live rows is clearly rejected
    gen = np.random.default_rng(8)
    bases = np.cumsum([0] + [r for r, _ in sizes])
    chunk_rows = [np.arange(max(b, 10), b + r) for b, (r, _) in zip(bases, sizes, strict=False)]
    wrong = np.array([gen.choice(chunk_rows[c]) for c in gen.integers(0, len(sizes), 20_000)])
    assert chi2_statistic(counts_by_id(wrong, ids), np.full(len(ids), 20_000 / len(ids))) > critical


def test_uniform_episode_items_are_drawn_per_item_not_per_step_chi_square() -> None:
    """Chi-square at significance 0.001: each episode (whatever its length) is equally likely."""
    buf = make_buffer(200, unit="episode")
    ends = [0, 2, 5, 9, 14, 20, 27, 35, 44, 54]      # episodes of 1..10 steps, column fresh
    buf.add(entry("a", 55, ends=ends, fresh=[0]))
    ids = item_ids(buf)
    lengths = buf.storage.length[ids]
    assert lengths.tolist() == list(range(1, 11))
    drawn = buf.sample(np.random.default_rng(3), DRAWS // 4, 1.0)
    observed = counts_by_id(drawn.ids, ids)
    critical = chi2_critical(len(ids) - 1, SIGNIFICANCE)
    assert chi2_statistic(observed, np.full(len(ids), DRAWS / 4 / len(ids))) < critical
    assert chi2_statistic(observed, DRAWS / 4 * lengths / lengths.sum()) > critical   # step-weighted: rejected


# ----- sequences never cross an episode end; every valid window is eligible ----------------------------------------


@st.composite
def chunks(draw: st.DrawFn, max_rows: int) -> list[tuple[int, int, list[int], list[int]]]:
    """Several chunk layouts (rows, num_envs, ends, fresh columns), each fitting `max_rows`."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        envs = draw(st.integers(1, 3))
        steps = draw(st.integers(1, max_rows // envs))
        rows = steps * envs
        ends = sorted(draw(st.lists(st.integers(0, rows - 1), unique=True, max_size=rows)))
        fresh = draw(st.lists(st.integers(0, envs - 1), unique=True, max_size=envs))
        out.append((rows, envs, ends, fresh))
    return out


def fill(buf: ReplayBuffer, layouts: list[tuple[int, int, list[int], list[int]]]) -> dict[str, int]:
    """Add the chunks; returns chunk id -> base id for those still in the buffer."""
    for n, (rows, envs, ends, fresh) in enumerate(layouts):
        buf.add(entry(f"c{n}", rows, num_envs=envs, ends=ends, fresh=fresh))
    return {c.entry.chunk_id: c.base_id for c in buf.storage.chunks.values()}


def expected_items(buf: ReplayBuffer, layouts: list[tuple[int, int, list[int], list[int]]],
                   unit: str) -> set[int]:
    """Brute force: ids of the items of every chunk whose first row the ring has not overwritten yet, and that
    belong to a chunk still held."""
    head, found = 0, set()
    kept = {c.entry.chunk_id for c in buf.storage.chunks.values()}
    for n, (rows, envs, ends, fresh) in enumerate(layouts):
        if unit == "sequence":
            items = brute_windows(rows // envs, envs, ends, buf.sampling.sequence_length)
        else:
            items = brute_episodes(rows // envs, envs, ends, fresh, buf.sampling.min_traj_len,
                                   buf.sampling.max_traj_len)
        if f"c{n}" in kept:
            found |= {head + offset for offset, _ in items}
        head += rows
    return {i for i in found if i >= head - buf.capacity}


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(capacity=st.integers(4, 40), length=st.integers(1, 5), layouts=chunks(30), seed=st.integers(0, 2**32 - 1),
       prioritized=st.booleans())
def test_sampled_sequences_never_cross_an_episode_end_and_every_window_is_eligible(
        capacity: int, length: int, layouts: list[tuple[int, int, list[int], list[int]]], seed: int,
        prioritized: bool) -> None:
    layouts = [lay for lay in layouts if lay[0] <= capacity] or [(capacity, 1, [], [])]
    buf = make_buffer(capacity, unit="sequence", sequence_length=length,
                      sampler="prioritized" if prioritized else "uniform")
    fill(buf, layouts)
    eligible = expected_items(buf, layouts, "sequence")
    # completeness and soundness: exactly the valid windows carry sampling weight
    assert set(np.flatnonzero(leaves(buf) > 0).tolist()) == {i % capacity for i in eligible}
    assert set(item_ids(buf).tolist()) == eligible
    if not eligible:
        return
    drawn = buf.sample(np.random.default_rng(seed), 3000, 0.5)
    for k in range(len(drawn.ids)):
        e = drawn.chunks[drawn.chunk_index[k]].entry
        assert drawn.lengths[k] == length
        rows = drawn.offsets[k] + np.arange(length) * e.num_envs     # one column, one row per step
        assert rows[0] >= 0 and rows[-1] < e.transitions           # inside the chunk
        assert not set(rows[:-1].tolist()) & set(e.ends)           # no episode end before the last step
    # with at most 40 items, 3000 draws reach every one of them (miss probability below 1e-17)
    assert set(drawn.ids.tolist()) == eligible


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(capacity=st.integers(4, 40), bounds=st.tuples(st.integers(1, 6), st.integers(1, 6)).map(sorted),
       layouts=chunks(30), seed=st.integers(0, 2**32 - 1))
def test_sampled_episodes_match_brute_force_enumeration(
        capacity: int, bounds: list[int], layouts: list[tuple[int, int, list[int], list[int]]], seed: int) -> None:
    layouts = [lay for lay in layouts if lay[0] <= capacity] or [(capacity, 1, [capacity - 1], [0])]
    buf = make_buffer(capacity, unit="episode", min_traj_len=bounds[0], max_traj_len=bounds[1])
    fill(buf, layouts)
    eligible = expected_items(buf, layouts, "episode")
    assert set(item_ids(buf).tolist()) == eligible
    assert set(np.flatnonzero(leaves(buf) > 0).tolist()) == {i % capacity for i in eligible}
    if not eligible:
        assert buf.items == 0 and len(buf) == 0
        return
    drawn = buf.sample(np.random.default_rng(seed), 3000, 1.0)
    for k in range(len(drawn.ids)):
        e = drawn.chunks[drawn.chunk_index[k]].entry
        col = int(drawn.offsets[k]) % e.num_envs
        rows = drawn.offsets[k] + np.arange(drawn.lengths[k]) * e.num_envs
        assert rows[-1] < e.transitions and rows[-1] in e.ends and not set(rows[:-1].tolist()) & set(e.ends)
        assert bounds[0] <= drawn.lengths[k] <= bounds[1]
        starts_fresh = rows[0] < e.num_envs and col in e.fresh_columns
        assert starts_fresh or rows[0] - e.num_envs in e.ends      # begins right after an end of its column
    assert set(drawn.ids.tolist()) == eligible
