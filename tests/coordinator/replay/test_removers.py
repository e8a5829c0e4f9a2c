"""The removers on their own: overwrite at capacity, max_staleness and max_use decide and count; no buffer."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rlfleet.coordinator.replay.removers.max_use import MaxUse
from rlfleet.coordinator.replay.removers.overwrite import Overwrite
from rlfleet.coordinator.replay.removers.staleness import MaxStaleness
from rlfleet.coordinator.replay.storage import Chunk
from tests.support.replay import entry


def chunk(key: int, live_items: int, version: int = 0) -> Chunk:
    return Chunk(entry(f"c{key}", 4, version=version), key, 4 * key, 1.0, 4, live_items)


# ----- overwrite -----------------------------------------------------------------------------------------------


def test_overwrite_evicts_only_the_chunks_left_without_items_and_counts_them() -> None:
    overwrite = Overwrite()
    touched = [chunk(0, 0), chunk(1, 2), chunk(2, 0)]
    assert overwrite.evicted_from(touched) == [touched[0], touched[2]]
    assert overwrite.evicted_from([chunk(3, 1)]) == []
    assert overwrite.state_dict() == {"evicted_chunks": 2}
    restored = Overwrite()
    restored.load_state_dict({"evicted_chunks": 2, "unrelated": 9})
    assert restored.evicted == 2


# ----- max_staleness ---------------------------------------------------------------------------------------------


def test_staleness_removes_chunks_more_than_the_limit_behind_the_latest_version() -> None:
    staleness = MaxStaleness()
    chunks = [chunk(k, 1, version=v) for k, v in enumerate([0, 3, 5, 6])]
    assert staleness.stale(chunks, 6, None) == []               # no limit: nothing is ever stale
    assert staleness.stale(chunks, 6, 3) == [chunks[0]]         # 6 lags 6 > 3; version 3 lags exactly 3: kept
    assert staleness.stale(chunks, 6, 0) == chunks[:3]
    assert staleness.state_dict() == {"removed_stale": 4}
    restored = MaxStaleness()
    restored.load_state_dict(staleness.state_dict())
    assert restored.removed == 4


# ----- max_use ---------------------------------------------------------------------------------------------------


def test_max_use_counts_every_draw_even_without_a_limit() -> None:
    uses = MaxUse(6, None)
    uses.count(np.array([1, 1, 4]))
    assert uses.uses.tolist() == [0, 2, 0, 0, 1, 0]
    assert uses.spent(np.array([1, 4])).tolist() == []           # no limit: nothing is ever used up
    uses.reset(np.array([1, 2]))                                  # rows rewritten
    assert uses.uses.tolist() == [0, 0, 0, 0, 1, 0]


@settings(max_examples=150, deadline=None)
@given(limit=st.integers(1, 4), before=st.lists(st.integers(0, 3), min_size=8, max_size=8),
       draws=st.lists(st.integers(0, 7), max_size=30))
def test_admit_keeps_the_first_draws_of_each_item_within_its_remaining_uses(limit: int, before: list[int],
                                                                           draws: list[int]) -> None:
    uses = MaxUse(8, limit)
    uses.uses[:] = np.minimum(before, limit - 1)                  # live items have uses left
    start = uses.uses.copy()
    slots = np.asarray(draws, np.int64)
    keep, used_up = uses.admit(slots)
    seen: Counter[int] = Counter()
    expected = []
    for slot in draws:                                            # sequential reference
        expected.append(seen[slot] < limit - start[slot])
        seen[slot] += 1
    assert keep.tolist() == expected
    kept = Counter(slots[keep].tolist())
    assert all(uses.uses[s] == start[s] + kept[s] for s in range(8))
    assert sorted(used_up.tolist()) == sorted(s for s in set(draws) if uses.uses[s] >= limit)


def test_spent_and_replay_find_the_items_at_the_limit_and_removals_count() -> None:
    uses = MaxUse(5, 2)
    uses.count(np.array([0, 3]))
    assert uses.spent(np.array([0, 3])).tolist() == []
    assert uses.replay(np.array([3, 3, 0])).tolist() == [0, 3]   # journalled draws, one use each
    assert uses.uses.tolist() == [2, 0, 0, 3, 0]
    uses.note_removed(2)
    assert uses.state_dict() == {"removed_max_use": 2}
    restored = MaxUse(5, 2)
    restored.load_state_dict(uses.state_dict())
    assert restored.removed == 2
