"""Replay buffers for tests: builders, brute-force references for the sampling units and a full consistency
recount.

Everything here is written independently of `rlfleet.coordinator.replay` (the references re-derive items from their
definitions), so a test comparing the buffer against them can actually catch a wrong implementation.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from rlfleet.coordinator.replay.buffer import Entry, ReplayBuffer
from rlfleet.coordinator.replay.samplers import ProportionalSampler, QueueSampler
from rlfleet.coordinator.replay.sumtree import SumTree
from rlfleet.shared.config.run_config import ReplayConfig, SamplingConfig

# ----- builders ---------------------------------------------------------------------------------------------


def make_buffer(capacity: int, *, unit: str = "transition", sampler: str = "uniform", **options: Any) -> ReplayBuffer:
    """A buffer; options go to ReplayConfig or SamplingConfig by field name."""
    replay_fields, sampling_fields = set(ReplayConfig.model_fields), set(SamplingConfig.model_fields)
    unknown = set(options) - replay_fields - sampling_fields
    assert not unknown, unknown
    replay = ReplayConfig(capacity_transitions=capacity, sampler=sampler,  # type: ignore[arg-type]
                          **{k: v for k, v in options.items() if k in replay_fields})
    sampling = SamplingConfig(unit=unit, **{k: v for k, v in options.items() if k in sampling_fields})  # type: ignore[arg-type]
    return ReplayBuffer("replay-0", replay, sampling)


def entry(chunk_id: str, rows: int, version: int = 0, num_envs: int = 1, ends: Iterable[int] = (),
          fresh: Iterable[int] = ()) -> Entry:
    return Entry(chunk_id, f"chunks/collector-0/{chunk_id}.msgpack", "0" * 64, rows, version, num_envs,
                 tuple(sorted(set(ends))), tuple(sorted(set(fresh))))


def item_ids(buf: ReplayBuffer) -> np.ndarray:
    """Row ids of the first rows of all live items, ascending."""
    return np.sort(buf.storage.ids[buf.storage.length > 0])


def tree_of(buf: ReplayBuffer) -> SumTree | None:
    """The sum-tree of a uniform or prioritized buffer's sampler; None for a queue."""
    return buf.sampler.tree if isinstance(buf.sampler, ProportionalSampler) else None


def queue_of(buf: ReplayBuffer) -> list[int]:
    """The item slots of a fifo or lifo buffer's queue, in insertion order."""
    assert isinstance(buf.sampler, QueueSampler)
    return list(buf.sampler.queue)


def leaves(buf: ReplayBuffer) -> np.ndarray:
    tree = tree_of(buf)
    assert tree is not None
    return tree.get(np.arange(buf.capacity))


# ----- brute-force references for the sampling units --------------------------------------------------------


def brute_windows(steps: int, num_envs: int, ends: Iterable[int], length: int) -> set[tuple[int, int]]:
    """(flat start, length) of every window of `length` steps of one column with no end before its last row."""
    end_rows = set(ends)
    found = set()
    for col in range(num_envs):
        for t in range(steps - length + 1):
            rows = [(t + k) * num_envs + col for k in range(length)]
            if not any(r in end_rows for r in rows[:-1]):
                found.add((rows[0], length))
    return found


def brute_episodes(steps: int, num_envs: int, ends: Iterable[int], fresh: Iterable[int], min_len: int,
                   max_len: int) -> set[tuple[int, int]]:
    """(flat start, length) of every whole episode: it ends at an end row, has no end before that, and starts
    either right after an end of its column or at step 0 of a fresh column."""
    end_rows, fresh_cols = set(ends), set(fresh)
    is_end = [[t * num_envs + col in end_rows for col in range(num_envs)] for t in range(steps)]
    found = set()
    for col in range(num_envs):
        for t0 in range(steps):
            starts_episode = (t0 == 0 and col in fresh_cols) or (t0 > 0 and is_end[t0 - 1][col])
            if not starts_episode:
                continue
            for t1 in range(t0, steps):
                if is_end[t1][col]:
                    if min_len <= t1 - t0 + 1 <= max_len:
                        found.add((t0 * num_envs + col, t1 - t0 + 1))
                    break
    return found


def brute_items(unit: str, steps: int, num_envs: int, ends: Iterable[int], fresh: Iterable[int],
                sampling: SamplingConfig) -> set[tuple[int, int]]:
    if unit == "transition":
        return {(r, 1) for r in range(steps * num_envs)}
    if unit == "chunk":  # the whole chunk, its length counted in rows (env steps) like the batch bounds
        return {(0, steps * num_envs)}
    if unit == "sequence":
        return brute_windows(steps, num_envs, ends, sampling.sequence_length)
    return brute_episodes(steps, num_envs, ends, fresh, sampling.min_traj_len, sampling.max_traj_len)


def item_rows(unit: str, offset: int, length: int, num_envs: int) -> list[int]:
    """Flat rows an item covers inside its chunk: one column, one row per step (a whole chunk: all its rows)."""
    if unit == "chunk":
        return list(range(offset, offset + length))
    return [offset + k * num_envs for k in range(length)]


# ----- consistency recount -------------------------------------------------------------------------------------


def assert_consistent(buf: ReplayBuffer) -> None:
    """Recompute every counter and cross-reference from the raw arrays and compare."""
    cap = buf.capacity
    live = buf.storage.ids >= 0
    slots = np.arange(cap)
    assert np.array_equal(buf.storage.chunk_key >= 0, live)
    assert np.all(buf.storage.ids[live] % cap == slots[live])            # slot = id % capacity
    assert np.all(buf.storage.ids[live] < buf.head)
    items = np.flatnonzero(buf.storage.length > 0)
    assert np.all(live[items]) and np.all(buf.storage.length >= 0)
    assert buf.transitions == int(live.sum())
    assert buf.items == len(items)
    assert buf.item_steps == int(buf.storage.length.sum())
    assert set(buf.storage.by_id) == {c.entry.chunk_id for c in buf.storage.chunks.values()}
    assert all(buf.storage.by_id[c.entry.chunk_id] is c for c in buf.storage.chunks.values())
    assert set(np.unique(buf.storage.chunk_key[live]).tolist()) == set(buf.storage.chunks)  # no chunk without rows
    for key, chunk in buf.storage.chunks.items():
        own = np.flatnonzero(buf.storage.chunk_key == key)
        rel = buf.storage.ids[own] - chunk.base_id
        assert np.all((rel >= 0) & (rel < chunk.entry.transitions))
        assert chunk.live_rows == len(own)
        mine = own[buf.storage.length[own] > 0]
        assert chunk.live_items == len(mine) > 0                 # a chunk without items is dropped
        valid = brute_items(buf.sampling.unit, chunk.entry.transitions // chunk.entry.num_envs,
                            chunk.entry.num_envs, chunk.entry.ends, chunk.entry.fresh_columns, buf.sampling)
        for slot in mine.tolist():
            offset, length = int(buf.storage.ids[slot] - chunk.base_id), int(buf.storage.length[slot])
            assert (offset, length) in valid
            for r in item_rows(buf.sampling.unit, offset, length, chunk.entry.num_envs):  # all rows live
                assert buf.storage.ids[(chunk.base_id + r) % cap] == chunk.base_id + r
    if tree_of(buf) is not None:
        values = leaves(buf)
        assert np.all(values[items] > 0)
        assert np.all(values[buf.storage.length == 0] == 0)
    else:
        assert set(queue_of(buf)) == set(items.tolist())
    if buf.replay.max_use is not None:
        assert np.all(buf.max_use.uses[items] < buf.replay.max_use)
