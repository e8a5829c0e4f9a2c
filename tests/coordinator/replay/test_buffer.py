"""coordinator.replay.buffer.ReplayBuffer: ring storage, eviction, units, samplers, removers and restore.

The hand-written cases pin the semantics down on small examples; the stateful test drives random sequences of
add / sample / update / remove_stale / expire_below against an independent reference model (rows and items
as plain dicts keyed by row id) and recounts every counter from the raw arrays after each step.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from rlfleet.coordinator.replay.buffer import Entry, ReplayBuffer, Sampled
from rlfleet.shared.config.run_config import SamplingConfig
from tests.support.replay import (
    assert_consistent,
    brute_items,
    entry,
    item_ids,
    item_rows,
    leaves,
    make_buffer,
    queue_of,
    tree_of,
)


def ids_of(entries: list[Entry]) -> list[str]:
    return [e.chunk_id for e in entries]


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ----- storage: the ring of row slots -------------------------------------------------------------------------


def test_rows_get_consecutive_ids_from_the_head_and_slot_is_id_mod_capacity() -> None:
    buf = make_buffer(10)
    a, gone_a = buf.add(entry("a", 4))
    b, gone_b = buf.add(entry("b", 6, num_envs=2))
    assert gone_a == gone_b == []
    assert (a.base_id, b.base_id, buf.head) == (0, 4, 10)
    assert buf.storage.ids.tolist() == list(range(10))
    c, _ = buf.add(entry("c", 3))                   # wraps: ids 10, 11, 12 land in slots 0, 1, 2
    assert c.base_id == 10 and buf.head == 13
    assert buf.storage.ids.tolist() == [10, 11, 12, 3, 4, 5, 6, 7, 8, 9]
    assert_consistent(buf)


def test_add_up_to_capacity_evicts_nothing_and_keeps_insertion_order() -> None:
    buf = make_buffer(30)
    for i, n in enumerate([10, 5, 15]):
        assert buf.add(entry(f"c{i}", n))[1] == []
    assert buf.transitions == 30 and len(buf) == 3 and buf.overwrite.evicted == 0
    assert ids_of(buf.entries()) == ["c0", "c1", "c2"]
    assert "c1" in buf and "c9" not in buf
    assert_consistent(buf)


def test_overwrite_is_fifo_by_row_and_a_partly_overwritten_chunk_stays() -> None:
    buf = make_buffer(10)
    buf.add(entry("a", 6))
    _, gone = buf.add(entry("b", 6))                # overwrites a's rows 0 and 1 only
    assert gone == []
    assert buf.transitions == 10 and buf.items == 10
    assert ids_of(buf.entries()) == ["a", "b"]
    assert buf.storage.chunks[buf.storage.by_id["a"].key].live_rows == 4
    assert item_ids(buf).tolist() == list(range(2, 12))
    _, gone = buf.add(entry("c", 5))                # ids 12..16 overwrite ids 2..6: all of a's rows, one of b's
    assert gone == [entry("a", 6)]                  # the whole entry comes back, payload path included
    assert buf.overwrite.evicted == 1
    assert ids_of(buf.entries()) == ["b", "c"]
    assert item_ids(buf).tolist() == list(range(7, 17))
    assert buf.transitions == 10
    assert_consistent(buf)


def test_eviction_returns_chunks_oldest_first_and_counts_them() -> None:
    buf = make_buffer(50)
    for i in range(5):
        buf.add(entry(f"c{i}", 10))
    _, gone = buf.add(entry("c5", 30))              # ids 50..79 overwrite ids 0..29: c0, c1, c2
    assert ids_of(gone) == ["c0", "c1", "c2"]
    assert ids_of(buf.entries()) == ["c3", "c4", "c5"]
    assert buf.overwrite.evicted == 3 and buf.transitions == 50
    assert "c0" not in buf
    assert_consistent(buf)


def test_a_chunk_whose_only_item_lost_its_first_row_is_dropped_with_all_its_rows() -> None:
    buf = make_buffer(10, unit="chunk")
    buf.add(entry("a", 6))
    _, gone = buf.add(entry("b", 6))                # a loses rows 0, 1, and with row 0 its only item
    assert gone == [entry("a", 6)]
    assert buf.transitions == 6                     # a's surviving rows are freed too
    assert buf.items == 1 and buf.item_steps == 6
    assert_consistent(buf)


def test_sequences_survive_a_partial_overwrite_unless_their_first_row_went() -> None:
    buf = make_buffer(12, unit="sequence", sequence_length=3)
    buf.add(entry("a", 8, num_envs=2))              # 4 steps x 2 envs: windows start at steps 0 and 1
    assert item_ids(buf).tolist() == [0, 1, 2, 3]
    buf.add(entry("b", 6, num_envs=2))              # ids 8..13 -> overwrites ids 0 and 1 (step 0 of a)
    assert item_ids(buf).tolist() == [2, 3, 8, 9]   # a keeps its windows that start at step 1
    assert ids_of(buf.entries()) == ["a", "b"]
    assert_consistent(buf)


def test_full_capacity_chunk_replaces_everything() -> None:
    buf = make_buffer(8)
    buf.add(entry("a", 3))
    buf.add(entry("b", 3))
    _, gone = buf.add(entry("big", 8))
    assert ids_of(gone) == ["a", "b"]
    assert ids_of(buf.entries()) == ["big"] and buf.transitions == 8
    assert_consistent(buf)


def test_chunk_larger_than_capacity_is_refused_and_changes_nothing() -> None:
    buf = make_buffer(8)
    buf.add(entry("a", 5))
    with pytest.raises(ValueError, match="does not fit"):
        buf.add(entry("huge", 9))
    assert buf.head == 5 and ids_of(buf.entries()) == ["a"] and "huge" not in buf
    assert_consistent(buf)


@pytest.mark.parametrize("bad", [entry("b", 7, num_envs=2), entry("b", 0), entry("b", 4, num_envs=0),
                                 entry("b", 6, ends=[2, 6]), entry("b", 6, ends=[-1])])
def test_malformed_chunks_are_refused_before_anything_changes(bad: Entry) -> None:
    """Rows that do not split into env columns, no rows, or episode ends outside the chunk (a negative one
    would silently wrap to the last row)."""
    buf = make_buffer(10, unit="episode")
    buf.add(entry("a", 6, ends=[2, 5], fresh=[0]))
    ids, length, counters = buf.storage.ids.copy(), buf.storage.length.copy(), (buf.head, buf.transitions, buf.items)
    with pytest.raises(ValueError):
        buf.add(bad)
    assert np.array_equal(ids, buf.storage.ids) and np.array_equal(length, buf.storage.length)
    assert counters == (buf.head, buf.transitions, buf.items)
    assert "b" not in buf
    assert_consistent(buf)


def test_re_adding_a_chunk_id_is_refused_and_changes_nothing() -> None:
    buf = make_buffer(100)
    buf.add(entry("a", 10))
    with pytest.raises(ValueError, match="already in buffer"):
        buf.add(entry("a", 10))
    assert buf.head == 10 and buf.transitions == 10 and len(buf) == 1
    assert_consistent(buf)


def test_an_evicted_chunk_id_is_no_longer_known() -> None:
    buf = make_buffer(4)
    buf.add(entry("a", 4))
    buf.add(entry("b", 4))
    assert "a" not in buf
    buf.add(entry("a", 2))                          # the buffer itself does not remember evicted ids
    assert ids_of(buf.entries()) == ["b", "a"]


def test_unservable_chunk_is_dropped_at_once_but_still_consumed_its_rows() -> None:
    buf = make_buffer(10, unit="episode")
    kept, _ = buf.add(entry("a", 6, ends=[2, 5], fresh=[0]))
    assert buf.items == 2
    chunk, gone = buf.add(entry("b", 6, ends=[], fresh=[0]))  # no episode ends inside: nothing to serve
    assert ids_of(gone) == ["b"]
    assert chunk.base_id == 6 and buf.head == 12
    assert buf.storage.unservable == 1 and buf.overwrite.evicted == 0
    assert "b" not in buf and len(buf) == 1
    # b's rows overwrote a's first two rows (ids 0, 1) before it was dropped: a's first episode is gone
    assert item_ids(buf).tolist() == [3] and buf.transitions == 4
    assert_consistent(buf)


def test_unservable_sequence_chunk_and_eviction_in_one_add() -> None:
    buf = make_buffer(6, unit="sequence", sequence_length=4)
    buf.add(entry("a", 4))
    _, gone = buf.add(entry("b", 3))                # too short for a window; overwrites a's row 0 -> a goes
    assert ids_of(gone) == ["a", "b"]
    assert buf.overwrite.evicted == 1 and buf.storage.unservable == 1
    assert len(buf) == 0 and buf.transitions == 0 and buf.items == 0
    assert_consistent(buf)


def test_entries_are_in_ring_order_and_record_the_entry() -> None:
    buf = make_buffer(100)
    entries = [entry(f"c{i}", i + 1, version=i) for i in range(5)]
    for e in entries:
        buf.add(e)
    assert buf.entries() == entries
    assert [buf.storage.by_id[e.chunk_id].base_id for e in entries] == [0, 1, 3, 6, 10]


# ----- sampling basics ---------------------------------------------------------------------------------------------


def test_sample_from_an_empty_buffer_raises() -> None:
    with pytest.raises(ValueError, match="empty"):
        make_buffer(10).sample(rng(), 1, 0.4)
    buf = make_buffer(10, unit="sequence", sequence_length=5)
    buf.add(entry("short", 3))                      # unservable: still empty
    with pytest.raises(ValueError, match="empty"):
        buf.sample(rng(), 1, 0.4)


def check_sampled(buf: ReplayBuffer, s: Sampled) -> None:
    """Structural checks of one draw against the buffer state it was drawn from."""
    n = len(s.ids)
    assert s.chunk_index.shape == s.offsets.shape == s.lengths.shape == s.weights.shape == (n,)
    assert s.chunk_index.dtype == s.offsets.dtype == s.lengths.dtype == s.ids.dtype == np.int64
    chunk_ids = ids_of([c.entry for c in s.chunks])
    assert len(set(chunk_ids)) == len(chunk_ids)
    assert set(s.chunk_index.tolist()) == set(range(len(s.chunks)))  # every chunk listed is used
    bases = np.array([c.base_id for c in s.chunks], np.int64)
    assert np.array_equal(s.offsets, s.ids - bases[s.chunk_index])
    for k in range(n):
        e = s.chunks[s.chunk_index[k]].entry
        rows = item_rows(buf.sampling.unit, int(s.offsets[k]), int(s.lengths[k]), e.num_envs)
        assert min(rows) >= 0 and max(rows) < e.transitions


def test_sample_shapes_offsets_and_weights() -> None:
    buf = make_buffer(1000)
    sizes = [1, 7, 64, 3, 200, 2]
    for i, n in enumerate(sizes):
        buf.add(entry(f"c{i}", n))
    s = buf.sample(rng(123), 5000, 0.4)
    assert len(s.ids) == 5000 and s.gone == []
    check_sampled(buf, s)
    assert len(s.chunks) == len(sizes)               # 5000 draws hit every chunk, even the 1-row one
    assert np.all(s.lengths == 1) and np.all(s.weights == 1.0)


def test_sample_is_deterministic_for_a_seed() -> None:
    buf = make_buffer(1000, sampler="prioritized")
    for i in range(10):
        buf.add(entry(f"c{i}", i + 1))
    buf.update_priorities(np.arange(20), np.linspace(0.1, 3, 20))
    a, b = buf.sample(rng(7), 100, 0.5), buf.sample(rng(7), 100, 0.5)
    assert ids_of([c.entry for c in a.chunks]) == ids_of([c.entry for c in b.chunks])
    for name in ("chunk_index", "offsets", "lengths", "ids", "weights"):
        assert np.array_equal(getattr(a, name), getattr(b, name))


@pytest.mark.parametrize("sampler, unit, max_use, expected", [
    ("uniform", "transition", None, [[27, 8, 12, 31, 39], [45, 43, 47, 14, 46], [23, 24, 44, 22, 40]]),
    ("prioritized", "transition", 2, [[28, 47, 11, 32, 39], [44, 42, 46, 14, 45], [24, 25, 43, 23, 40]]),
    ("uniform", "sequence", 1, [[25, 8, 10, 29, 37], [42, 41, 44, 13, 24], [26, 45, 21, 40, 18]]),
])
def test_draws_for_a_seed_are_those_of_the_single_class_buffer(sampler: str, unit: str, max_use: int | None,
                                                                expected: list[list[int]]) -> None:
    """Pinned from the buffer before it was split into storage, samplers and removers: a seed must keep drawing
    the same items (runs resumed across the change, and deterministic runs, depend on it)."""
    buf = make_buffer(40, sampler=sampler, unit=unit, max_use=max_use, alpha=0.6, sequence_length=2)
    for i in range(6):
        buf.add(entry(f"c{i}", 8, num_envs=2, ends=[3, 6], fresh=[0, 1]))
    if sampler == "prioritized":
        buf.update_priorities(np.arange(8, 48, 3), np.linspace(0.1, 4, 14))
    generator = rng(2024)
    draws = [buf.sample(generator, 5, 0.5) for _ in expected]
    assert [d.ids.tolist() for d in draws] == expected
    if sampler == "prioritized":
        assert np.round(draws[0].weights, 6).tolist() == [0.501189, 0.330661, 0.659755, 0.380732, 0.501189]


def test_overwritten_rows_are_never_sampled() -> None:
    buf = make_buffer(20)
    buf.add(entry("old", 10))
    buf.add(entry("mid", 10))
    buf.sample(rng(), 10, 0.4)
    buf.add(entry("new", 15))                       # overwrites all of old and half of mid
    s = buf.sample(rng(), 4000, 0.4)
    assert set(ids_of([c.entry for c in s.chunks])) == {"mid", "new"}
    assert s.ids.min() >= 15 and set(s.ids.tolist()) == set(range(15, 35))
    check_sampled(buf, s)


def test_sampled_items_of_each_unit_are_the_chunk_items() -> None:
    e = entry("a", 12, num_envs=2, ends=[3, 4, 9], fresh=[1])    # 6 steps x 2 envs
    for unit in ("transition", "sequence", "episode", "chunk"):
        buf = make_buffer(50, unit=unit, sequence_length=2)
        buf.add(e)
        s = buf.sample(rng(), 500, 1.0)
        check_sampled(buf, s)
        expected = brute_items(unit, 6, 2, e.ends, e.fresh_columns, buf.sampling)
        drawn = set(zip(s.offsets.tolist(), s.lengths.tolist(), strict=True))
        assert drawn == expected, unit               # 500 draws over at most 12 items see all of them


def test_a_whole_chunk_item_counts_all_its_rows() -> None:
    buf = make_buffer(40, unit="chunk", sampler="fifo")
    buf.add(entry("a", 12, num_envs=3))
    buf.add(entry("b", 8, num_envs=2))
    assert buf.items == 2 and buf.item_steps == 20
    s = buf.sample(rng(), 5, 1.0, max_steps=12)     # the cap is in rows too: only a fits
    assert s.offsets.tolist() == [0] and s.lengths.tolist() == [12]
    assert buf.sample(rng(), 5, 1.0, max_steps=20).lengths.tolist() == [12, 8]


def test_max_steps_caps_the_steps_of_a_draw_but_serves_at_least_one_item() -> None:
    buf = make_buffer(100, unit="episode")
    buf.add(entry("a", 20, ends=[2, 9, 10, 19], fresh=[0]))  # episodes of 3, 7, 1 and 9 steps
    for seed in range(20):
        s = buf.sample(rng(seed), 50, 1.0, max_steps=12)
        assert len(s.ids) >= 1 and s.lengths.sum() <= 12
    assert len(buf.sample(rng(), 50, 1.0, max_steps=1).ids) == 1
    s = buf.sample(rng(), 50, 1.0, max_steps=0)      # even a cap below every item serves one
    assert len(s.ids) == 1


# ----- prioritized ---------------------------------------------------------------------------------------------


def test_new_items_enter_at_max_priority_to_the_alpha() -> None:
    buf = make_buffer(100, sampler="prioritized", alpha=0.5, priority_epsilon=0.01)
    buf.add(entry("a", 4))
    assert buf.max_priority == 1.0
    assert np.array_equal(leaves(buf)[:4], np.ones(4))
    assert buf.update_priorities(np.array([0, 1]), np.array([8.99, 0.0])) == 2
    assert buf.max_priority == pytest.approx(9.0)
    assert leaves(buf)[:4].tolist() == pytest.approx([3.0, 0.1, 1.0, 1.0])  # (p + eps) ** alpha
    chunk, _ = buf.add(entry("b", 2))
    assert chunk.initial_leaf == pytest.approx(3.0)
    assert leaves(buf)[4:6].tolist() == pytest.approx([3.0, 3.0])
    buf.update_priorities(np.array([4]), np.array([0.5]))   # lower priorities never lower the max
    assert buf.max_priority == pytest.approx(9.0)
    assert buf.sampler.new_leaf == pytest.approx(3.0)
    assert_consistent(buf)


def test_update_priorities_ignores_ids_that_were_overwritten() -> None:
    buf = make_buffer(4, sampler="prioritized", alpha=1.0)
    buf.add(entry("a", 4))
    buf.add(entry("b", 2))                          # ids 4, 5 take slots 0, 1 from ids 0, 1
    before = leaves(buf).copy()
    updated = buf.update_priorities(np.array([0, 1, 2, 5]), np.array([7.0, 7.0, 3.0, 5.0]))
    assert updated == 2                             # 0 and 1 are gone; their slots' occupants are untouched
    after = leaves(buf)
    assert after[0] == before[0] and after[2] == pytest.approx(3.0) and after[1] == pytest.approx(5.0)
    assert buf.max_priority == pytest.approx(5.0 + buf.replay.priority_epsilon)
    assert buf.update_priorities(np.array([0]), np.array([100.0])) == 0
    assert buf.max_priority < 100
    assert_consistent(buf)


def test_update_priorities_ignores_rows_that_are_not_item_starts_and_removed_items() -> None:
    buf = make_buffer(20, unit="sequence", sampler="prioritized", sequence_length=3, max_use=1)
    buf.add(entry("a", 5))                          # windows at ids 0, 1, 2
    assert buf.update_priorities(np.array([3, 4]), np.array([5.0, 5.0])) == 0  # inside windows, not starts
    s = buf.sample(rng(), 1, 1.0)
    used = int(s.ids[0])
    assert buf.update_priorities(np.array([used]), np.array([5.0])) == 0      # removed by max_use
    assert buf.max_priority == 1.0
    assert_consistent(buf)


def test_update_priorities_last_duplicate_wins_and_counts_each() -> None:
    buf = make_buffer(10, sampler="prioritized", alpha=1.0, priority_epsilon=1e-6)
    buf.add(entry("a", 3))
    assert buf.update_priorities(np.array([1, 1]), np.array([4.0, 2.0])) == 2
    assert leaves(buf)[1] == pytest.approx(2.0)
    assert buf.max_priority == pytest.approx(4.0)


# ----- queues ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sampler", ["fifo", "lifo"])
def test_queues_serve_oldest_or_newest_first_without_replacement(sampler: str) -> None:
    buf = make_buffer(100, unit="chunk", sampler=sampler)
    for i in range(5):
        buf.add(entry(f"c{i}", 4))
    s = buf.sample(rng(), 3, 1.0)
    order = ["c0", "c1", "c2"] if sampler == "fifo" else ["c4", "c3", "c2"]
    assert [s.chunks[k].entry.chunk_id for k in s.chunk_index] == order
    assert np.all(s.offsets == 0) and np.all(s.lengths == 4) and np.all(s.weights == 1)
    s = buf.sample(rng(), 50, 1.0)                  # more than there are: each item once
    assert len(s.ids) == 5 and len(set(s.ids.tolist())) == 5


def test_fifo_queue_with_max_use_one_drains_in_order_and_hands_back_chunks() -> None:
    buf = make_buffer(100, unit="chunk", sampler="fifo", max_use=1)
    for i in range(5):
        buf.add(entry(f"c{i}", 4))
    first = buf.sample(rng(), 2, 1.0)
    assert ids_of(first.gone) == ["c0", "c1"] and buf.max_use.removed == 2
    second = buf.sample(rng(), 2, 1.0)
    assert ids_of(second.gone) == ["c2", "c3"]
    buf.add(entry("c5", 4))
    third = buf.sample(rng(), 10, 1.0)
    assert ids_of(third.gone) == ["c4", "c5"] and buf.items == 0 and len(buf) == 0
    assert_consistent(buf)


def test_queue_max_steps_takes_the_longest_prefix_that_fits() -> None:
    buf = make_buffer(100, unit="chunk", sampler="fifo")
    for i, steps in enumerate([3, 4, 2, 5]):
        buf.add(entry(f"c{i}", steps))
    assert buf.sample(rng(), 10, 1.0, max_steps=9).lengths.tolist() == [3, 4, 2]
    assert buf.sample(rng(), 10, 1.0, max_steps=8).lengths.tolist() == [3, 4]
    assert buf.sample(rng(), 10, 1.0, max_steps=2).lengths.tolist() == [3]     # at least one


# ----- max_use --------------------------------------------------------------------------------------------------


def test_max_use_caps_repeats_within_one_call_and_removes_the_item() -> None:
    buf = make_buffer(10, max_use=3)
    buf.add(entry("a", 1))
    s = buf.sample(rng(), 10, 0.4)
    assert s.ids.tolist() == [0, 0, 0]              # its three remaining uses, no more
    assert s.gone == [entry("a", 1)]
    assert buf.max_use.removed == 1 and buf.items == 0 and len(buf) == 0
    assert_consistent(buf)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), max_use=st.integers(1, 4), sizes=st.lists(st.integers(1, 6), min_size=1,
                                                                                     max_size=5),
       counts=st.lists(st.integers(1, 30), min_size=1, max_size=8), prioritized=st.booleans())
def test_max_use_never_serves_an_item_more_than_its_remaining_uses(seed: int, max_use: int, sizes: list[int],
                                                                     counts: list[int], prioritized: bool) -> None:
    buf = make_buffer(40, max_use=max_use, sampler="prioritized" if prioritized else "uniform")
    for i, n in enumerate(sizes):
        buf.add(entry(f"c{i}", n))
    if prioritized:
        buf.update_priorities(np.arange(buf.head), np.random.default_rng(seed).random(buf.head) * 5)
    served: Counter[int] = Counter()
    gone: list[str] = []
    generator = rng(seed)
    for count in counts:
        if buf.items == 0:
            break
        remaining = buf.items * max_use - sum(served[i] for i in item_ids(buf).tolist())
        s = buf.sample(generator, count, 0.5)
        assert 1 <= len(s.ids) <= min(count, remaining)
        if count <= 16:  # every redraw round keeps at least one draw, and there are 16 rounds
            assert len(s.ids) == min(count, remaining)
        served.update(s.ids.tolist())
        assert max(served.values()) <= max_use
        gone += ids_of(s.gone)
        assert_consistent(buf)
        assert not set(item_ids(buf).tolist()) & {i for i, n in served.items() if n >= max_use}
    assert buf.max_use.removed == sum(n >= max_use for n in served.values())
    assert set(gone) == {f"c{i}" for i in range(len(sizes))} - {c.entry.chunk_id for c in buf.storage.chunks.values()}


def test_max_use_prioritized_weights_stay_in_range() -> None:
    buf = make_buffer(50, sampler="prioritized", max_use=2)
    buf.add(entry("a", 10))
    buf.update_priorities(np.arange(10), np.arange(10.0))
    s = buf.sample(rng(), 15, 1.0)
    assert np.all((s.weights > 0) & (s.weights <= 1))


# ----- max_staleness and expire_below ---------------------------------------------------------------------------


def test_remove_stale_drops_chunks_lagging_by_more_than_max_staleness() -> None:
    buf = make_buffer(100)
    for i, version in enumerate([0, 1, 2, 3, 1]):
        buf.add(entry(f"c{i}", 5, version=version))
    assert buf.remove_stale(3, None) == []
    gone = buf.remove_stale(3, 1)                   # lag 3 - version > 1  <=>  version < 2
    assert ids_of(gone) == ["c0", "c1", "c4"]
    assert ids_of(buf.entries()) == ["c2", "c3"] and buf.staleness.removed == 3
    assert buf.remove_stale(3, 1) == []             # idempotent
    assert ids_of(buf.remove_stale(4, 0)) == ["c2", "c3"] and buf.staleness.removed == 5
    assert buf.transitions == buf.items == 0
    assert_consistent(buf)


def test_remove_stale_frees_rows_without_moving_the_head() -> None:
    buf = make_buffer(10)
    buf.add(entry("a", 5, version=0))
    buf.add(entry("b", 5, version=5))
    buf.remove_stale(5, 2)
    assert buf.head == 10 and buf.transitions == 5
    _, gone = buf.add(entry("c", 5, version=5))     # takes a's freed slots: nothing to evict
    assert gone == [] and ids_of(buf.entries()) == ["b", "c"]
    assert_consistent(buf)


def test_expire_below_frees_older_rows_and_drops_emptied_chunks() -> None:
    buf = make_buffer(20, unit="sequence", sequence_length=2)
    buf.add(entry("a", 4))                          # windows at ids 0, 1, 2
    buf.add(entry("b", 4))                          # windows at ids 4, 5, 6
    assert buf.expire_below(2) == []                # a keeps its window at id 2
    assert item_ids(buf).tolist() == [2, 4, 5, 6] and buf.transitions == 6
    assert ids_of(buf.expire_below(3)) == ["a"]
    assert buf.overwrite.evicted == 1 and buf.transitions == 4
    assert buf.expire_below(0) == []
    assert_consistent(buf)


# ----- restore: priority_state / apply_priority_state / apply_uses -----------------------------------------------


def rebuild(source: ReplayBuffer, snapshot: tuple[np.ndarray, np.ndarray, np.ndarray, int] | None,
            log: list[tuple[str, np.ndarray, np.ndarray | None]]) -> tuple[ReplayBuffer, list[Entry]]:
    """What Run does on restore: re-add the kept chunks at their ids with their initial leaves, free rows the
    ring has moved past, then replay the snapshot and the log of priority updates and draws after it."""
    target = ReplayBuffer(source.buffer_id, source.replay, source.sampling)
    for chunk in sorted(source.storage.chunks.values(), key=lambda c: c.base_id):
        target.restore_chunk(chunk.entry, chunk.base_id, chunk.initial_leaf)
    gone = target.expire_below(source.head - target.capacity)
    if snapshot is not None:
        gone += target.apply_priority_state(*snapshot)
    for kind, ids, values in log:
        if kind == "priority":
            assert values is not None
            target.update_priorities(ids, values)
        else:
            gone += target.apply_uses(ids)
    target.load_state_dict(source.state_dict())
    return target, gone


def assert_same_state(a: ReplayBuffer, b: ReplayBuffer, compare_uses: bool) -> None:
    assert np.array_equal(a.storage.ids, b.storage.ids)
    assert np.array_equal(a.storage.length, b.storage.length)
    assert (a.transitions, a.items, a.item_steps, a.head) == (b.transitions, b.items, b.item_steps, b.head)
    assert a.entries() == b.entries()
    tree_a, tree_b = tree_of(a), tree_of(b)
    if tree_a is not None:
        assert np.array_equal(leaves(a), leaves(b))   # identical sampling distribution
        assert tree_a.total == tree_b.total           # type: ignore[union-attr]
    else:
        assert [int(a.storage.ids[s]) for s in queue_of(a)] == [int(b.storage.ids[s]) for s in queue_of(b)]
    if compare_uses:
        items = a.storage.length > 0
        assert np.array_equal(a.max_use.uses[items], b.max_use.uses[items])


def test_priority_state_round_trip_reproduces_leaves_uses_and_draws() -> None:
    buf = make_buffer(12, sampler="prioritized", max_use=4, alpha=0.7)
    buf.add(entry("a", 5))
    buf.add(entry("b", 6))
    buf.update_priorities(np.arange(11), np.linspace(0.0, 4.0, 11))
    buf.sample(rng(1), 12, 0.5)
    buf.add(entry("c", 4))                          # overwrites ids 0..2 (wraps)
    ids, leaf_values, uses = buf.priority_state()
    assert np.array_equal(np.sort(ids), item_ids(buf))
    state = (ids, leaf_values, uses, buf.head)
    restored, gone = rebuild(buf, state, [])
    assert gone == []
    assert_same_state(buf, restored, compare_uses=True)
    assert_consistent(restored)
    x, y = buf.sample(rng(9), 30, 0.6), restored.sample(rng(9), 30, 0.6)
    assert np.array_equal(x.ids, y.ids) and np.array_equal(x.weights, y.weights) and x.gone == y.gone


def test_apply_priority_state_removes_items_the_snapshot_no_longer_lists() -> None:
    buf = make_buffer(20, max_use=1)
    buf.add(entry("a", 3))
    buf.add(entry("b", 2))
    s = buf.sample(rng(), 4, 1.0)                   # uses up some items (and maybe a whole chunk)
    state = (*buf.priority_state(), buf.head)
    restored, gone = rebuild(buf, state, [])
    assert ids_of(gone) == []                       # fully used chunks are no longer kept, so not re-added
    assert_same_state(buf, restored, compare_uses=True)
    # without the snapshot the re-added chunks would serve their used items again
    fresh, _ = rebuild(buf, None, [])
    assert fresh.items > buf.items and set(item_ids(fresh).tolist()) & set(s.ids.tolist())


def test_apply_uses_replays_draws_and_removes_exhausted_items() -> None:
    buf = make_buffer(20, max_use=2)
    buf.add(entry("a", 2))
    buf.add(entry("b", 3))
    log: list[tuple[str, np.ndarray, np.ndarray | None]] = []
    generator = rng(3)
    for _ in range(3):
        s = buf.sample(generator, 3, 1.0)
        log.append(("use", s.ids, None))
    restored, _ = rebuild(buf, None, log)
    assert_same_state(buf, restored, compare_uses=True)
    # ids that are not (or no longer) items are ignored
    before = restored.max_use.uses.copy()
    assert restored.apply_uses(np.array([-1, restored.head, 10**6])) == []
    assert np.array_equal(before, restored.max_use.uses)


def test_apply_uses_ignores_ids_overwritten_since_the_draw() -> None:
    buf = make_buffer(4, max_use=1)
    buf.add(entry("a", 4))
    s = buf.sample(rng(), 2, 1.0)                   # two of ids 0..3 used up
    buf.add(entry("b", 4))                          # ids 4..7 replace all of them
    restored, gone = rebuild(buf, None, [("use", s.ids, None)])
    assert gone == [] and restored.items == 4 and np.all(restored.max_use.uses == 0)
    assert_same_state(buf, restored, compare_uses=True)


@st.composite
def layouts(draw: st.DrawFn, max_rows: int) -> tuple[int, int, list[int], list[int]]:
    num_envs = draw(st.integers(1, min(3, max_rows)))
    steps = draw(st.integers(1, max_rows // num_envs))
    rows = steps * num_envs
    ends = draw(st.lists(st.integers(0, rows - 1), unique=True, max_size=rows))
    fresh = draw(st.lists(st.integers(0, num_envs - 1), unique=True, max_size=num_envs))
    return rows, num_envs, ends, fresh


CONFIGS = st.fixed_dictionaries({
    "capacity": st.integers(1, 30),
    "unit": st.sampled_from(["transition", "sequence", "episode", "chunk"]),
    "sampler": st.sampled_from(["uniform", "prioritized", "fifo", "lifo"]),
    "max_use": st.none() | st.integers(1, 3),
    "alpha": st.sampled_from([0.0, 0.6, 1.0]),
    "sequence_length": st.integers(1, 4),
    "min_traj_len": st.integers(1, 2),
    "max_traj_len": st.integers(2, 6),
})


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(config=CONFIGS, data=st.data())
def test_restore_from_entries_snapshot_and_log_reproduces_the_buffer(config: dict[str, Any],
                                                                      data: st.DataObject) -> None:
    """Random operations with a snapshot somewhere in the middle; the journal after it holds priority updates
    and (with max_use) draws. Rebuilding from the kept entries must land on exactly the same buffer."""
    buf = make_buffer(**config)
    cap = buf.capacity
    snapshot: tuple[np.ndarray, np.ndarray, np.ndarray, int] | None = None
    log: list[tuple[str, np.ndarray, np.ndarray | None]] = []
    generator = rng(data.draw(st.integers(0, 2**16)))
    ops = data.draw(st.lists(st.sampled_from(["add", "add", "sample", "update", "stale", "snapshot"]),
                             min_size=1, max_size=18))
    for n, op in enumerate(ops):
        if op == "add":
            rows, envs, ends, fresh = data.draw(layouts(cap))
            buf.add(entry(f"c{n}", rows, version=n, num_envs=envs, ends=ends, fresh=fresh))
        elif op == "sample" and buf.items:
            s = buf.sample(generator, data.draw(st.integers(1, 8)), 0.5)
            if buf.replay.max_use is not None:
                log.append(("use", s.ids, None))
        elif op == "update" and buf.replay.traits.priorities and buf.head:
            ids = np.asarray(data.draw(st.lists(st.integers(0, buf.head - 1), min_size=1, max_size=6)), np.int64)
            priorities = generator.random(len(ids)) * 4
            buf.update_priorities(ids, priorities)
            log.append(("priority", ids, priorities))
        elif op == "stale":
            buf.remove_stale(n, data.draw(st.integers(0, 4)))
        elif op == "snapshot":
            snapshot = (*buf.priority_state(), buf.head)
            log.clear()
    restored, gone = rebuild(buf, snapshot, log)
    assert gone == []
    assert_consistent(restored)
    assert_same_state(buf, restored, compare_uses=buf.replay.max_use is not None)
    if buf.items:
        seed = data.draw(st.integers(0, 2**16))
        x, y = buf.sample(rng(seed), 6, 0.5), restored.sample(rng(seed), 6, 0.5)
        assert np.array_equal(x.ids, y.ids) and np.array_equal(x.weights, y.weights) and x.gone == y.gone


# ----- the stateful model test --------------------------------------------------------------------------------------


@dataclass
class Item:
    chunk_id: str
    length: int
    leaf: float
    uses: int = 0


@dataclass
class Model:
    """The buffer's semantics restated with plain dicts keyed by row id (no ring arithmetic, no arrays)."""

    capacity: int
    sampling: SamplingConfig
    prioritized: bool
    alpha: float
    epsilon: float
    max_use: int | None
    head: int = 0
    rows: dict[int, str] = field(default_factory=dict)            # live row id -> chunk id
    items: dict[int, Item] = field(default_factory=dict)          # first row id -> item, in insertion order
    chunks: dict[str, tuple[Entry, int]] = field(default_factory=dict)  # chunk id -> (entry, base id)
    max_priority: float = 1.0
    evicted: int = 0
    unservable: int = 0
    removed_max_use: int = 0
    removed_stale: int = 0

    def _drop(self, chunk_id: str) -> Entry:
        e, _ = self.chunks.pop(chunk_id)
        self.rows = {r: c for r, c in self.rows.items() if c != chunk_id}
        self.items = {r: it for r, it in self.items.items() if it.chunk_id != chunk_id}
        return e

    def _drop_empty(self) -> list[Entry]:
        with_items = {it.chunk_id for it in self.items.values()}
        empty = [cid for cid, (_, base) in sorted(self.chunks.items(), key=lambda kv: kv[1][1])
                 if cid not in with_items]
        return [self._drop(cid) for cid in empty]

    def free_below(self, row_id: int) -> list[Entry]:
        self.rows = {r: c for r, c in self.rows.items() if r >= row_id}
        self.items = {r: it for r, it in self.items.items() if r >= row_id}  # an item dies with its first row
        gone = self._drop_empty()
        self.evicted += len(gone)
        return gone

    def add(self, e: Entry) -> list[Entry]:
        gone = self.free_below(self.head + e.transitions - self.capacity)
        base = self.head
        self.head += e.transitions
        self.chunks[e.chunk_id] = (e, base)
        self.rows.update({base + r: e.chunk_id for r in range(e.transitions)})
        leaf = self.max_priority ** self.alpha if self.prioritized else 1.0
        found = brute_items(self.sampling.unit, e.transitions // e.num_envs, e.num_envs, e.ends, e.fresh_columns,
                            self.sampling)
        for offset, length in sorted(found):
            self.items[base + offset] = Item(e.chunk_id, length, leaf)
        if not found:
            self.unservable += 1
            gone.append(self._drop(e.chunk_id))
        return gone

    def use(self, ids: list[int]) -> list[Entry]:
        for i in ids:
            self.items[i].uses += 1
        if self.max_use is None:
            return []
        done = [i for i in set(ids) if self.items[i].uses >= self.max_use]
        for i in done:
            del self.items[i]
        self.removed_max_use += len(done)
        return self._drop_empty()

    def update(self, ids: list[int], priorities: list[float]) -> int:
        updated = 0
        for i, p in zip(ids, priorities, strict=True):
            if i in self.items:
                self.items[i].leaf = (p + self.epsilon) ** self.alpha
                self.max_priority = max(self.max_priority, p + self.epsilon)
                updated += 1
        return updated

    def remove_stale(self, latest: int, max_staleness: int) -> list[Entry]:
        stale = [cid for cid, (e, base) in sorted(self.chunks.items(), key=lambda kv: kv[1][1])
                 if latest - e.policy_version > max_staleness]
        self.removed_stale += len(stale)
        return [self._drop(cid) for cid in stale]

    def entries(self) -> list[Entry]:
        return [e for e, _ in sorted(self.chunks.values(), key=lambda eb: eb[1])]


def expected_weights(model: Model, ids: np.ndarray, beta: float) -> np.ndarray:
    """w_i = (N P(i))**-beta / max_j (N P(j))**-beta with P(i) = leaf_i / total over the live items."""
    all_leaves = np.array([it.leaf for it in model.items.values()])
    n, total = len(all_leaves), math.fsum(all_leaves)
    p = np.array([model.items[i].leaf for i in ids.tolist()]) / total
    return (n * p) ** -beta / np.max((n * all_leaves / total) ** -beta)


def queue_prefix(lengths: list[int], count: int, max_steps: int | None) -> int:
    """How many queue items a draw takes: at most `count`, and as many as fit under `max_steps` (at least one)."""
    taken, steps = 0, 0
    for length in lengths[:count]:
        if max_steps is not None and steps + length > max_steps and taken:
            break
        taken += 1
        steps += length
        if max_steps is not None and steps > max_steps:
            break
    return taken


class BufferMachine(RuleBasedStateMachine):
    buf: ReplayBuffer
    model: Model

    @initialize(config=CONFIGS, epsilon=st.sampled_from([1e-6, 0.5]))
    def setup(self, config: dict[str, Any], epsilon: float) -> None:
        self.buf = make_buffer(**config, priority_epsilon=epsilon)
        self.model = Model(self.buf.capacity, self.buf.sampling, self.buf.replay.traits.priorities, config["alpha"],
                           epsilon, config["max_use"])
        self.n = 0

    def check(self) -> None:
        buf, model = self.buf, self.model
        assert_consistent(buf)
        assert buf.head == model.head
        assert set(buf.storage.ids[buf.storage.ids >= 0].tolist()) == set(model.rows)
        assert item_ids(buf).tolist() == sorted(model.items)
        assert buf.transitions == len(model.rows)
        assert buf.items == len(model.items)
        assert buf.item_steps == sum(it.length for it in model.items.values())
        assert buf.entries() == model.entries()
        assert (buf.overwrite.evicted, buf.storage.unservable, buf.max_use.removed, buf.staleness.removed) == (
            model.evicted, model.unservable, model.removed_max_use, model.removed_stale)
        assert buf.max_priority == pytest.approx(model.max_priority, rel=1e-12)
        slots = [i % buf.capacity for i in model.items]
        assert buf.max_use.uses[slots].tolist() == [it.uses for it in model.items.values()]
        if tree_of(buf) is not None:
            np.testing.assert_allclose(leaves(buf)[slots], [it.leaf for it in model.items.values()], rtol=1e-12)
        else:
            assert [int(buf.storage.ids[s]) for s in queue_of(buf)] == list(model.items)  # insertion order

    @rule(data=st.data(), version=st.integers(0, 6))
    def add(self, data: st.DataObject, version: int) -> None:
        rows, envs, ends, fresh = data.draw(layouts(self.buf.capacity + 3))
        self.n += 1
        chunk_id = f"c{self.n}"
        if self.model.chunks and data.draw(st.integers(0, 9)) == 0:
            chunk_id = data.draw(st.sampled_from(sorted(self.model.chunks)))
        e = entry(chunk_id, rows, version=version, num_envs=envs, ends=ends, fresh=fresh)
        if chunk_id in self.model.chunks or rows > self.buf.capacity:
            with pytest.raises(ValueError):
                self.buf.add(e)
        else:
            chunk, gone = self.buf.add(e)
            assert chunk.base_id == self.model.head
            assert gone == self.model.add(e)
        self.check()

    @rule(seed=st.integers(0, 2**32 - 1), count=st.integers(0, 12), beta=st.sampled_from([0.0, 0.4, 1.0]),
          max_steps=st.none() | st.integers(0, 15))
    def sample(self, seed: int, count: int, beta: float, max_steps: int | None) -> None:
        buf, model = self.buf, self.model
        if not model.items:
            with pytest.raises(ValueError):
                buf.sample(rng(seed), count, beta, max_steps)
            return
        s = buf.sample(rng(seed), count, beta, max_steps)
        n = len(s.ids)
        assert n <= count
        check_sampled(buf, s)
        for k in range(n):
            item = model.items[int(s.ids[k])]
            e, base = model.chunks[item.chunk_id]
            assert s.chunks[s.chunk_index[k]].entry == e
            assert s.offsets[k] == s.ids[k] - base and s.lengths[k] == item.length
        if tree_of(buf) is None:
            order = list(model.items) if buf.replay.sampler == "fifo" else list(reversed(model.items))
            taken = queue_prefix([model.items[i].length for i in order], count, max_steps)
            assert s.ids.tolist() == order[:taken]
            assert np.all(s.weights == 1)
        else:
            if max_steps is not None:
                assert s.lengths.sum() <= max_steps or n == 1
            elif model.max_use is None:
                assert n == count
            else:  # count <= 16 draws: each of the (16) redraw rounds keeps at least one
                assert n == min(count, sum(model.max_use - it.uses for it in model.items.values()))
            if count:
                assert n >= 1
            if model.max_use is None and buf.replay.traits.priorities:
                np.testing.assert_allclose(s.weights, expected_weights(model, s.ids, beta), rtol=1e-9)
            elif buf.replay.traits.priorities:
                assert np.all((s.weights > 0) & (s.weights <= 1 + 1e-12))
            else:
                assert np.all(s.weights == 1)
        if model.max_use is not None:
            drawn = Counter(s.ids.tolist())
            assert all(c <= model.max_use - model.items[i].uses for i, c in drawn.items())
        assert s.gone == model.use(s.ids.tolist())
        self.check()

    @precondition(lambda self: self.buf.replay.traits.priorities)
    @rule(data=st.data())
    def update(self, data: st.DataObject) -> None:
        issued = st.integers(0, max(0, self.model.head - 1))
        ids = data.draw(st.lists(issued, max_size=8))
        priorities = data.draw(st.lists(st.floats(0, 50, allow_nan=False), min_size=len(ids), max_size=len(ids)))
        updated = self.buf.update_priorities(np.asarray(ids, np.int64), np.asarray(priorities, np.float64))
        assert updated == self.model.update(ids, priorities)
        self.check()

    @rule(latest=st.integers(0, 8), max_staleness=st.integers(0, 4))
    def remove_stale(self, latest: int, max_staleness: int) -> None:
        assert self.buf.remove_stale(latest, max_staleness) == self.model.remove_stale(latest, max_staleness)
        self.check()

    @rule(data=st.data())
    def expire_below(self, data: st.DataObject) -> None:
        row_id = data.draw(st.integers(0, self.model.head))
        assert self.buf.expire_below(row_id) == self.model.free_below(row_id)
        self.check()


TestBufferMachine = BufferMachine.TestCase
TestBufferMachine.settings = settings(max_examples=150, stateful_step_count=25, deadline=None, derandomize=True,
                                      suppress_health_check=[HealthCheck.too_slow])


def test_the_model_and_the_recount_can_fail() -> None:
    """Sanity check of the references: they agree with the buffer here and notice a corrupted buffer."""
    buf = make_buffer(4)
    model = Model(4, buf.sampling, False, 0.6, 1e-6, None)
    for e in (entry("a", 3), entry("b", 3)):
        assert buf.add(e)[1] == model.add(e)
    assert sorted(model.items) == [2, 3, 4, 5] == item_ids(buf).tolist()
    buf.storage.length[buf.storage.ids == 2] = 0                    # corrupt: drop an item the model still has
    with pytest.raises(AssertionError):
        assert_consistent(buf)


def _state(buf: ReplayBuffer) -> tuple[Any, ...]:
    sum_tree = tree_of(buf)
    tree = None if sum_tree is None else (leaves(buf).tolist(), round(sum_tree.total, 9))
    storage = buf.storage
    chunks = {k: (c.entry, c.base_id, c.initial_leaf, c.live_rows, c.live_items) for k, c in storage.chunks.items()}
    return (storage.ids.tolist(), storage.chunk_key.tolist(), storage.length.tolist(), buf.max_use.uses.tolist(), tree,
            [] if sum_tree is not None else queue_of(buf), chunks, buf.head, buf.transitions, buf.items, buf.item_steps,
            buf.overwrite.evicted, storage.unservable)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=st.sampled_from(["transition", "sequence", "episode", "chunk"]),
       sampler=st.sampled_from(["uniform", "prioritized", "fifo"]), capacity=st.integers(16, 120),
       seed=st.integers(0, 2**16))
def test_add_many_leaves_the_state_adding_one_by_one_would(unit: str, sampler: str, capacity: int, seed: int) -> None:
    options: dict[str, Any] = {"sequence_length": 2} if unit == "sequence" else {}
    batched, single = (make_buffer(capacity, unit=unit, sampler=sampler, **options) for _ in range(2))
    gen = np.random.default_rng(seed)
    n = 0
    for _ in range(8):
        batch = []
        for _ in range(int(gen.integers(1, 6))):
            envs = int(gen.integers(1, 3))
            rows = envs * int(gen.integers(1, 9))
            ends = gen.choice(rows, size=int(gen.integers(0, rows + 1)), replace=False).tolist()
            batch.append(entry(f"c{n}", rows, num_envs=envs, ends=ends, fresh=range(envs)))
            n += 1
        added, gone = batched.add_many(batch)
        one_by_one = [single.add(e) for e in batch]
        assert [c.entry for c in added] == batch
        assert sorted(ids_of(gone)) == sorted(ids_of([e for _, out in one_by_one for e in out]))
        assert _state(batched) == _state(single)
    assert_consistent(batched)


def test_add_many_refuses_a_batch_that_repeats_a_chunk_id_before_changing_anything() -> None:
    buf = make_buffer(64)
    before = _state(buf)
    with pytest.raises(ValueError, match="twice"):
        buf.add_many([entry("a", 4), entry("a", 4)])
    assert _state(buf) == before
