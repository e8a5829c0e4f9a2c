"""coordinator.replay.storage.RingStorage on its own: ids, slots, chunk and item bookkeeping, no sampler.

The stateful test drives random writes and removals (the operations the buffer composes: free what a write will
cover, kill items, forget chunks) and recounts every counter from the raw arrays after each step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from rlfleet.coordinator.replay.storage import RingStorage
from rlfleet.shared.config.run_config import SamplingConfig
from tests.support.replay import brute_items, entry


def storage(capacity: int, **sampling: Any) -> RingStorage:
    return RingStorage("replay-0", capacity, SamplingConfig(**sampling))


def put(ring: RingStorage, *entries: Any, leaf: float = 1.0) -> Any:
    """Free what the write covers the way the buffer does (kill its items, free its rows, forget chunks left
    without items), then write."""
    ring.check(list(entries))
    slots = ring.slots_ahead(sum(e.transitions for e in entries))
    held = slots[ring.ids[slots] >= 0]
    ring.kill_items(ring.item_starts(held))
    for chunk in ring.free_rows(held):
        if chunk.live_items == 0:
            ring.forget(chunk, ring.rows_of(chunk))
    return ring.write(list(entries), slots, leaf)


def test_rows_get_consecutive_ids_from_the_head_and_wrap_by_slot() -> None:
    ring = storage(10)
    a = put(ring, entry("a", 4))
    b = put(ring, entry("b", 6, num_envs=2))
    assert [c.base_id for c in (*a.chunks, *b.chunks)] == [0, 4] and ring.head == 10
    assert ring.ids.tolist() == list(range(10))
    c = put(ring, entry("c", 3))                      # ids 10..12 land in slots 0..2
    assert c.chunks[0].base_id == 10 and c.slots.tolist() == [0, 1, 2]
    assert ring.ids.tolist() == [10, 11, 12, 3, 4, 5, 6, 7, 8, 9]
    assert ring.entries() == [entry("a", 4), entry("b", 6, num_envs=2), entry("c", 3)]  # a keeps its 4th row


def test_write_returns_item_starts_as_positions_in_the_written_slots() -> None:
    ring = storage(8, unit="episode")
    put(ring, entry("pad", 5, ends=[4], fresh=[0]))
    w = put(ring, entry("a", 6, ends=[1, 5], fresh=[0]))   # rows 5..10 -> slots 5, 6, 7, 0, 1, 2
    assert w.slots.tolist() == [5, 6, 7, 0, 1, 2]
    assert w.starts.tolist() == [0, 2]                     # episodes at chunk rows 0 (length 2) and 2 (length 4)
    assert ring.length[w.slots[w.starts]].tolist() == [2, 4]
    assert (ring.items, ring.item_steps) == (2, 6)


def test_a_chunk_that_offers_no_item_is_counted_unservable_and_left_to_the_caller() -> None:
    ring = storage(20, unit="episode")
    w = put(ring, entry("a", 6))                           # no episode ends: nothing to serve
    assert ring.unservable == 1 and w.chunks[0].live_items == 0 and "a" in ring.by_id
    ring.forget(w.chunks[0], ring.rows_of(w.chunks[0]))
    assert ring.transitions == 0 and ring.entries() == []


@pytest.mark.parametrize("entries, message", [
    ([entry("big", 11)], "does not fit a buffer of 10"),
    ([entry("odd", 5, num_envs=2)], "5 rows / 2 envs"),
    ([entry("e", 4, ends=[4])], "episode ends must be row indices below 4"),
    ([entry("x", 2), entry("x", 2)], "appears twice"),
    ([entry("have", 2)], "already in buffer 'replay-0'"),
])
def test_check_refuses_what_cannot_be_written_and_changes_nothing(entries: list[Any], message: str) -> None:
    ring = storage(10)
    put(ring, entry("have", 3))
    before = (ring.ids.copy(), ring.head, ring.transitions, ring.items, ring.entries())
    with pytest.raises(ValueError, match=message):
        ring.check(entries)
    assert np.array_equal(before[0], ring.ids) and before[1:] == (ring.head, ring.transitions, ring.items,
                                                                  ring.entries())


def test_killing_items_keeps_their_rows_and_freeing_rows_reports_the_chunks_touched() -> None:
    ring = storage(10)
    a, b = put(ring, entry("a", 4)).chunks[0], put(ring, entry("b", 4)).chunks[0]
    ring.kill_items(np.array([0, 1, 4]))
    assert (ring.items, ring.transitions, a.live_items, b.live_items) == (5, 8, 2, 3)
    assert ring.item_starts(np.arange(10)).tolist() == [2, 3, 5, 6, 7]
    touched = ring.free_rows(np.array([4, 0, 1]))
    assert touched == [a, b]                               # by key: the order they were written in
    assert (a.live_rows, b.live_rows, ring.transitions) == (2, 3, 5)
    own = ring.rows_of(a)
    ring.kill_items(ring.item_starts(own))
    assert ring.forget(a, own) == entry("a", 4)
    assert ring.ids.tolist() == [-1, -1, -1, -1, -1, 5, 6, 7, -1, -1] and ring.transitions == 3


def test_ids_are_recognised_only_while_their_slot_still_holds_them() -> None:
    ring = storage(4)
    put(ring, entry("a", 4))
    put(ring, entry("b", 2))                               # ids 4, 5 overwrite ids 0, 1
    ids = np.array([0, 1, 2, 4, 5])
    assert ring.holds(ids).tolist() == [False, False, True, True, True]
    ring.kill_items(np.array([2]))
    assert ring.holds_items(ids).tolist() == [False, False, False, True, True]
    assert ring.rows_below(4).tolist() == [2, 3] and ring.items_below(4).tolist() == [3]


def test_state_dict_round_trips_head_and_the_unservable_count() -> None:
    ring = storage(10, unit="episode")
    put(ring, entry("a", 3))
    other = storage(10, unit="episode")
    other.load_state_dict(ring.state_dict())
    assert ring.state_dict() == {"head": 3, "unservable": 1} == other.state_dict()
    other.seek(7)
    assert put(other, entry("b", 2, ends=[1], fresh=[0])).chunks[0].base_id == 7


class StorageMachine(RuleBasedStateMachine):
    ring: RingStorage

    @initialize(capacity=st.integers(1, 24), unit=st.sampled_from(["transition", "sequence", "episode", "chunk"]))
    def setup(self, capacity: int, unit: str) -> None:
        self.ring = storage(capacity, unit=unit, sequence_length=2)
        self.n = 0

    @rule(data=st.data())
    def write(self, data: st.DataObject) -> None:
        envs = data.draw(st.integers(1, min(2, self.ring.capacity)))
        rows = envs * data.draw(st.integers(1, max(1, self.ring.capacity // envs)))
        ends = data.draw(st.lists(st.integers(0, rows - 1), unique=True, max_size=rows))
        self.n += 1
        w = put(self.ring, entry(f"c{self.n}", rows, num_envs=envs, ends=ends, fresh=range(envs)))
        assert w.chunks[0].base_id == self.ring.head - rows
        for chunk in w.chunks:
            if chunk.live_items == 0:
                self.ring.forget(chunk, self.ring.rows_of(chunk))

    @precondition(lambda self: self.ring.items > 0)
    @rule(data=st.data())
    def kill(self, data: st.DataObject) -> None:
        live = self.ring.live_items().tolist()
        picked = np.array(data.draw(st.lists(st.sampled_from(live), unique=True, min_size=1)), np.int64)
        chunks = self.ring.chunks_of(picked)
        self.ring.kill_items(picked)
        for chunk in chunks:
            if chunk.live_items == 0:
                self.ring.forget(chunk, self.ring.rows_of(chunk))

    @invariant()
    def counters_match_the_arrays(self) -> None:
        if not hasattr(self, "ring"):
            return
        ring = self.ring
        live = ring.ids >= 0
        assert np.array_equal(ring.chunk_key >= 0, live)
        assert np.all(ring.ids[live] % ring.capacity == np.flatnonzero(live)) and np.all(ring.ids < ring.head)
        assert ring.transitions == int(live.sum())
        assert ring.items == int((ring.length > 0).sum()) and ring.item_steps == int(ring.length.sum())
        assert set(ring.by_id) == {c.entry.chunk_id for c in ring.chunks.values()}
        for chunk in ring.chunks.values():
            own = np.flatnonzero(ring.chunk_key == chunk.key)
            assert chunk.live_rows == len(own) and chunk.live_items == int((ring.length[own] > 0).sum()) > 0
            valid = brute_items(ring.sampling.unit, chunk.entry.transitions // chunk.entry.num_envs,
                                chunk.entry.num_envs, chunk.entry.ends, chunk.entry.fresh_columns, ring.sampling)
            for slot in own[ring.length[own] > 0].tolist():
                assert (int(ring.ids[slot] - chunk.base_id), int(ring.length[slot])) in valid


TestStorageMachine = StorageMachine.TestCase
TestStorageMachine.settings = settings(max_examples=60, stateful_step_count=20, deadline=None, derandomize=True,
                                       suppress_health_check=[HealthCheck.too_slow])
