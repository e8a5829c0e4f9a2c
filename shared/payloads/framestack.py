"""Rebuilding a compact chunk's observation stacks: the one place where its single frames become `obs` and
`next_obs` again.

A frame-stacked image run's chunk stores each frame once (shared/payloads/schema.py, the compact layout), but every
algorithm reads flat [T, N, k, *frame] `obs` and `next_obs` columns. Everything that opens payloads (the learner's
PayloadReader, datasets, `rlfleet record`) calls `flat_columns` once after decoding, so no reader needs to know
which layout a chunk has: a flat chunk passes through unchanged.

The stacks follow gymnasium's FrameStackObservation with its default padding ('reset'): an episode's first
observation is its first frame k times, and each step drops the oldest frame and appends the new one.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlfleet.shared.payloads.schema import SchemaError

COMPACT = ("frame", "history", "tail_frame", "final_frame")


def is_compact(arrays: Mapping[str, np.ndarray]) -> bool:
    return "frame" in arrays


def flat_columns(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The chunk's columns with `obs` and `next_obs` [T, N, k, *frame] in place of the compact layout's frame
    columns; a flat chunk's columns as they are.

    Call it after ChunkSchema.check (which proves the shapes, and one final frame per episode end); anything
    still inconsistent raises SchemaError, so a reader counts the payload as corrupt instead of training on it."""
    if not is_compact(arrays):
        return dict(arrays)
    missing = [name for name in (*COMPACT, "terminated", "truncated", "valid") if name not in arrays]
    if missing:
        raise SchemaError(f"a compact chunk (it has a 'frame' column) lacks {missing}")
    frame, history, tail, final = (arrays[name] for name in COMPACT)
    if frame.ndim < 3 or history.ndim != frame.ndim or tail.shape != frame.shape[1:]:
        raise SchemaError(f"compact columns disagree: frame {list(frame.shape)} ([T, N, *frame]), history "
                          f"{list(history.shape)} ([N, k-1, *frame]), tail_frame {list(tail.shape)} ([N, *frame])")
    steps, envs, shape = frame.shape[0], frame.shape[1], frame.shape[2:]
    if history.shape[0] != envs or history.shape[2:] != shape:
        raise SchemaError(f"history is {list(history.shape)}, expected [{envs}, k-1, {', '.join(map(str, shape))}]")
    ends = np.asarray(arrays["terminated"], bool) | np.asarray(arrays["truncated"], bool)
    if ends.shape != (steps, envs) or final.shape != (int(ends.sum()), *shape):
        raise SchemaError(f"final_frame is {list(final.shape)}: one frame per row that ends an episode "
                          f"({int(ends.sum())} of the chunk's {list(ends.shape)} rows are terminated or truncated)")
    k = history.shape[1] + 1
    # Every frame of each env in time order: its k-1 frames before the chunk, then one per row.
    frames = np.concatenate([history.swapaxes(0, 1), frame])  # [k-1+T, N, *frame]
    # The row on which each row's episode began within the chunk, or -(k-1) where it began before (history).
    began = np.full((steps, envs), -(k - 1), np.int64)
    restart = np.zeros((steps, envs), bool)
    restart[1:] = ends[:-1]
    began[restart] = np.nonzero(restart)[0]
    began = np.maximum.accumulate(began, axis=0)
    # Stack slot j of row t holds the frame of row t-(k-1)+j, or the episode's first frame before it began.
    rows = np.arange(steps)[:, None, None] - (k - 1) + np.arange(k)
    rows = np.maximum(rows, began[:, :, None])
    obs = frames[rows + (k - 1), np.arange(envs)[None, :, None]]  # [T, N, k, *frame]
    newest = np.concatenate([frame[1:], tail[None]])  # the frame each row's step brought, unless it ended
    newest[ends] = final
    next_obs = np.concatenate([obs[:, :, 1:], newest[:, :, None]], axis=2)
    reset = ends & ~np.asarray(arrays["valid"], bool)  # the env failed and was reset: a fresh stack
    next_obs[reset] = newest[reset][:, None]
    out = {name: value for name, value in arrays.items() if name not in COMPACT}
    out["obs"], out["next_obs"] = obs, next_obs
    return out
