"""Shared helpers for the replay-buffer tests: builders, brute-force references and a chi-square quantile.

Everything here is written independently of `coordinator.replay` (the references re-derive items from their
definitions), so a test comparing the buffer against them can actually catch a wrong implementation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from coordinator.replay.buffer import Entry, ReplayBuffer
from shared.config.run_config import ReplayConfig, SamplingConfig

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
    return np.sort(buf.ids[buf.length > 0])


def leaves(buf: ReplayBuffer) -> np.ndarray:
    assert buf.tree is not None
    return buf.tree.get(np.arange(buf.capacity))


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
    live = buf.ids >= 0
    slots = np.arange(cap)
    assert np.array_equal(buf.chunk_key >= 0, live)
    assert np.all(buf.ids[live] % cap == slots[live])            # slot = id % capacity
    assert np.all(buf.ids[live] < buf.head)
    items = np.flatnonzero(buf.length > 0)
    assert np.all(live[items]) and np.all(buf.length >= 0)
    assert buf.transitions == int(live.sum())
    assert buf.items == len(items)
    assert buf.item_steps == int(buf.length.sum())
    assert set(buf.by_id) == {c.entry.chunk_id for c in buf.chunks.values()}
    assert all(buf.by_id[c.entry.chunk_id] is c for c in buf.chunks.values())
    assert set(np.unique(buf.chunk_key[live]).tolist()) == set(buf.chunks)  # no chunk without rows
    for key, chunk in buf.chunks.items():
        own = np.flatnonzero(buf.chunk_key == key)
        rel = buf.ids[own] - chunk.base_id
        assert np.all((rel >= 0) & (rel < chunk.entry.transitions))
        assert chunk.live_rows == len(own)
        mine = own[buf.length[own] > 0]
        assert chunk.live_items == len(mine) > 0                 # a chunk without items is dropped
        valid = brute_items(buf.sampling.unit, chunk.entry.transitions // chunk.entry.num_envs,
                            chunk.entry.num_envs, chunk.entry.ends, chunk.entry.fresh_columns, buf.sampling)
        for slot in mine.tolist():
            offset, length = int(buf.ids[slot] - chunk.base_id), int(buf.length[slot])
            assert (offset, length) in valid
            for r in item_rows(buf.sampling.unit, offset, length, chunk.entry.num_envs):  # all rows live
                assert buf.ids[(chunk.base_id + r) % cap] == chunk.base_id + r
    if buf.tree is not None:
        values = leaves(buf)
        assert np.all(values[items] > 0)
        assert np.all(values[buf.length == 0] == 0)
        assert buf.queue == {}
    else:
        assert set(buf.queue) == set(items.tolist())
    if buf.replay.max_use is not None:
        assert np.all(buf.uses[items] < buf.replay.max_use)


# ----- chi-square -----------------------------------------------------------------------------------------------


def _regularized_gamma_q(a: float, x: float) -> float:
    """Q(a, x) = Gamma(a, x) / Gamma(a): series for P below a + 1, Lentz's continued fraction above."""
    if x <= 0:
        return 1.0
    log_prefix = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        while abs(term) > abs(total) * 1e-16:
            n += 1
            term *= x / n
            total += term
        return 1.0 - total * math.exp(log_prefix)
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-16:
            break
    return math.exp(log_prefix) * h


def chi2_sf(x: float, df: int) -> float:
    """P(X > x) for X ~ chi-square with `df` degrees of freedom."""
    return _regularized_gamma_q(df / 2, x / 2)


def chi2_critical(df: int, significance: float = 0.001) -> float:
    """The x with P(chi2_df > x) = significance, by bisection on the survival function."""
    lo, hi = 0.0, float(df)
    while chi2_sf(hi, df) > significance:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if chi2_sf(mid, df) > significance else (lo, mid)
    return (lo + hi) / 2


def chi2_statistic(observed: np.ndarray, expected: np.ndarray) -> float:
    observed, expected = np.asarray(observed, np.float64), np.asarray(expected, np.float64)
    assert observed.shape == expected.shape and np.all(expected > 0)
    assert math.isclose(observed.sum(), expected.sum(), rel_tol=1e-9)
    return float(((observed - expected) ** 2 / expected).sum())
