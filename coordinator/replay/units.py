"""Sampling units: which items a chunk offers, as (first row, length) pairs in its flat row order.

A chunk holds `steps` rows for each of `num_envs` env columns; row t*num_envs + i is step t of env i. An item
is `length` consecutive steps of one column. The coordinator derives items from the episode ends the
collector reports, so it serves sequences and episodes without ever opening a payload.
"""

from __future__ import annotations

import numpy as np

from rlfleet.shared.config.run_config import SamplingConfig, SamplingUnit


def chunk_items(unit: SamplingUnit, steps: int, num_envs: int, ends: list[int], fresh_columns: list[int],
                sampling: SamplingConfig) -> tuple[np.ndarray, np.ndarray]:
    """(flat start rows, lengths) of every item the chunk offers under `unit`: lengths are steps along one
    column, except for a whole chunk, whose length is all of its rows."""
    rows = steps * num_envs
    if unit == "transition":
        return np.arange(rows, dtype=np.int64), np.ones(rows, np.int64)
    if unit == "chunk":  # the whole chunk; its length counts all its rows (env steps), as batch bounds do
        return np.zeros(1, np.int64), np.full(1, rows, np.int64)
    flat = np.zeros(rows, bool)
    flat[np.asarray(ends, np.int64)] = True
    end = flat.reshape(steps, num_envs)
    if unit == "sequence":
        return _sequences(end, sampling.sequence_length)
    return _episodes(end, fresh_columns, sampling.min_traj_len, sampling.max_traj_len)


def _sequences(end: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Windows of `length` steps with no episode end before their last step: they never cross an episode."""
    steps, num_envs = end.shape
    if length > steps:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    before = np.vstack([np.zeros((1, num_envs), np.int64), np.cumsum(end, axis=0)])  # ends in rows [0, t)
    t = np.arange(steps - length + 1)
    ok = before[t + length - 1] == before[t]  # no end among steps t .. t+length-2
    tt, ii = np.nonzero(ok)
    return tt * num_envs + ii, np.full(len(tt), length, np.int64)


def _episodes(end: np.ndarray, fresh_columns: list[int], min_len: int, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Episodes that both begin and end inside the chunk (a column's first episode only if it starts fresh)."""
    steps, num_envs = end.shape
    fresh = set(fresh_columns)
    starts, lengths = [], []
    for col in range(num_envs):
        begin = 0 if col in fresh else None
        for t in np.flatnonzero(end[:, col]):
            if begin is not None and min_len <= t - begin + 1 <= max_len:
                starts.append(begin * num_envs + col)
                lengths.append(t - begin + 1)
            begin = int(t) + 1
    order = np.argsort(starts, kind="stable")
    return np.asarray(starts, np.int64)[order], np.asarray(lengths, np.int64)[order]
