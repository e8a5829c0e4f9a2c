"""coordinator.replay.units.chunk_items: which items a chunk offers, checked by hand and against brute force."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlfleet.coordinator.replay.units import chunk_items
from rlfleet.shared.config.run_config import SamplingConfig
from tests.support.replay import brute_episodes, brute_windows


def items(unit: str, steps: int, num_envs: int, ends: Sequence[int] = (), fresh: Sequence[int] = (),
          **sampling: int) -> list[tuple[int, int]]:
    starts, lengths = chunk_items(unit, steps, num_envs, list(ends), list(fresh),  # type: ignore[arg-type]
                                  SamplingConfig(**sampling))  # type: ignore[arg-type]
    assert starts.dtype == np.int64 and lengths.dtype == np.int64
    assert starts.shape == lengths.shape
    return list(zip(starts.tolist(), lengths.tolist(), strict=True))


# ----- transition and chunk ---------------------------------------------------------------------------------


@pytest.mark.parametrize("steps, num_envs", [(1, 1), (5, 1), (3, 4), (7, 2)])
def test_transition_unit_offers_every_row_once(steps: int, num_envs: int) -> None:
    # ends and fresh columns are irrelevant: a transition never crosses anything
    assert items("transition", steps, num_envs, ends=[0], fresh=[0]) == [(r, 1) for r in range(steps * num_envs)]


@pytest.mark.parametrize("steps, num_envs", [(1, 1), (5, 1), (3, 4)])
def test_chunk_unit_is_one_item_at_offset_zero_covering_all_rows(steps: int, num_envs: int) -> None:
    # its length counts every row (env steps), the unit of the batch bounds and the rate limiter
    assert items("chunk", steps, num_envs, ends=[0, 1]) == [(0, steps * num_envs)]


# ----- sequence -----------------------------------------------------------------------------------------------


def test_sequences_single_column_by_hand() -> None:
    # rows 0..7, an episode ends at row 2: windows of 3 may end at row 2 but not contain it earlier
    assert items("sequence", 8, 1, ends=[2], sequence_length=3) == [(0, 3), (3, 3), (4, 3), (5, 3)]


def test_sequences_two_columns_by_hand() -> None:
    # 4 steps x 2 envs; column 0 ends at step 1 (row 2), column 1 at step 0 (row 1)
    # column 0 windows of 2: t=0 ok (end is its last row), t=1 crosses, t=2 ok; column 1: t=0 crosses, t=1, t=2 ok
    assert items("sequence", 4, 2, ends=[1, 2], sequence_length=2) == [(0, 2), (3, 2), (4, 2), (5, 2)]


def test_sequence_of_length_one_is_every_row() -> None:
    assert items("sequence", 3, 2, ends=[0, 1, 5], sequence_length=1) == [(r, 1) for r in range(6)]


def test_sequence_longer_than_the_chunk_offers_nothing() -> None:
    assert items("sequence", 3, 2, sequence_length=4) == []
    assert items("sequence", 4, 2, sequence_length=4) == [(0, 4), (1, 4)]


@st.composite
def chunk_layouts(draw: st.DrawFn) -> tuple[int, int, list[int], list[int]]:
    steps, num_envs = draw(st.integers(1, 12)), draw(st.integers(1, 4))
    rows = steps * num_envs
    ends = draw(st.lists(st.integers(0, rows - 1), unique=True, max_size=rows))
    fresh = draw(st.lists(st.integers(0, num_envs - 1), unique=True, max_size=num_envs))
    return steps, num_envs, sorted(ends), fresh


@settings(max_examples=200, deadline=None, derandomize=True)
@given(layout=chunk_layouts(), length=st.integers(1, 14))
def test_sequences_match_brute_force_enumeration(layout: tuple[int, int, list[int], list[int]], length: int) -> None:
    steps, num_envs, ends, fresh = layout
    got = items("sequence", steps, num_envs, ends, fresh, sequence_length=length)
    assert [s for s, _ in got] == sorted(s for s, _ in got)                # ascending flat starts
    assert len(got) == len(set(got))
    assert set(got) == brute_windows(steps, num_envs, ends, length)       # sound and complete


# ----- episode -------------------------------------------------------------------------------------------------


def test_episodes_single_column_by_hand() -> None:
    # rows 0..9; ends at 2, 3 and 7: episodes [3..3] and [4..7]; [0..2] only when the column started fresh
    assert items("episode", 10, 1, ends=[2, 3, 7]) == [(3, 1), (4, 4)]
    assert items("episode", 10, 1, ends=[2, 3, 7], fresh=[0]) == [(0, 3), (3, 1), (4, 4)]


def test_episodes_without_an_end_or_past_the_last_end_are_not_whole() -> None:
    assert items("episode", 5, 1, fresh=[0]) == []          # runs past the chunk
    assert items("episode", 5, 1, ends=[1], fresh=[0]) == [(0, 2)]  # rows 2..4 continue in the next chunk


def test_episodes_length_filter() -> None:
    ends, fresh = [2, 3, 7], [0]
    assert items("episode", 10, 1, ends, fresh, min_traj_len=2) == [(0, 3), (4, 4)]
    assert items("episode", 10, 1, ends, fresh, max_traj_len=3) == [(0, 3), (3, 1)]
    assert items("episode", 10, 1, ends, fresh, min_traj_len=3, max_traj_len=3) == [(0, 3)]


def test_episodes_two_columns_by_hand() -> None:
    # 4 steps x 2 envs. column 0 (rows 0,2,4,6) ends at rows 2 and 6; column 1 (rows 1,3,5,7) ends at row 3
    # column 0 fresh: episodes at steps 0..1 and 2..3; column 1 not fresh: its first episode (0..1) is partial
    # and steps 2..3 have no end
    assert items("episode", 4, 2, ends=[2, 3, 6], fresh=[0]) == [(0, 2), (4, 2)]
    assert items("episode", 4, 2, ends=[2, 3, 6], fresh=[0, 1]) == [(0, 2), (1, 2), (4, 2)]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(layout=chunk_layouts(), bounds=st.tuples(st.integers(1, 13), st.integers(1, 13)).map(sorted))
def test_episodes_match_brute_force_enumeration(layout: tuple[int, int, list[int], list[int]],
                                                bounds: list[int]) -> None:
    steps, num_envs, ends, fresh = layout
    lo, hi = bounds
    got = items("episode", steps, num_envs, ends, fresh, min_traj_len=lo, max_traj_len=hi)
    assert [s for s, _ in got] == sorted(s for s, _ in got)
    assert len(got) == len(set(got))
    assert set(got) == brute_episodes(steps, num_envs, ends, fresh, lo, hi)
    # the episodes of one column never overlap and each ends exactly on an end row
    end_rows = set(ends)
    covered: set[int] = set()
    for start, length in got:
        rows = [start + k * num_envs for k in range(length)]
        assert rows[-1] in end_rows and not end_rows & set(rows[:-1])
        assert not covered & set(rows)
        covered |= set(rows)


def test_brute_force_references_are_not_vacuous() -> None:
    """The references the property tests compare against do produce (and reject) items."""
    assert brute_windows(4, 1, [1], 2) == {(0, 2), (2, 2)}  # (1, 2) crosses the end at row 1
    assert brute_episodes(6, 1, [1, 4], [], 1, 10) == {(2, 3)}
    assert brute_episodes(6, 1, [1, 4], [0], 1, 10) == {(0, 2), (2, 3)}
