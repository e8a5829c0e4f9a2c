"""Compact chunks of frame-stacked image runs: the stacks rebuilt from single frames are exactly the flat layout's,
and a compact chunk whose columns disagree is refused."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from rlfleet.shared.payloads.framestack import flat_columns
from rlfleet.shared.payloads.schema import ChunkSchema, SchemaError
from tests.support.frames import twin_rollouts


@pytest.mark.parametrize("frames", [1, 2, 3, 4])
@pytest.mark.parametrize("env", [
    {},  # one channel, channels first: [k, 1, 6, 7]
    {"channels": 3, "channels_first": False},  # channels last: [k, 6, 7, 3]
    {"raise_at": 3},  # an env error on every episode's third step
    {"reshape_at": 4},  # a frame of another shape on every episode's fourth step: an env error
])
def test_rebuilt_stacks_equal_the_flat_layout_of_the_same_steps(frames: int, env: dict) -> None:
    compact, flat = twin_rollouts(frames, max_steps=6, **env)
    errors = ends = 0
    try:
        # Chunks of several lengths: episodes end mid-chunk, on a chunk's last row, and begin on its first row.
        for steps in (7, 1, 5, 12, 3):
            a, b = compact.collect(steps, random=True), flat.collect(steps, random=True)
            compact.schema.check(a.arrays, num_envs=3)
            assert "obs" not in a.arrays and a.arrays["history"].shape == (3, frames - 1, *b.arrays["obs"].shape[3:])
            rebuilt = flat_columns(a.arrays)
            assert set(rebuilt) == set(b.arrays)
            for name, value in b.arrays.items():
                np.testing.assert_array_equal(rebuilt[name], value, err_msg=name)
            errors += a.env_errors
            ends += len(a.ends)
    finally:
        compact.close()
        flat.close()
    assert ends > 10 and (errors > 0) == bool(env.get("raise_at") or env.get("reshape_at"))


def test_a_flat_chunk_passes_through() -> None:
    arrays = {"obs": np.zeros((2, 1, 3), np.float32), "rewards": np.zeros((2, 1), np.float32)}
    assert flat_columns(arrays).keys() == arrays.keys()


def _compact() -> tuple[ChunkSchema, dict[str, np.ndarray]]:
    compact, flat = twin_rollouts(4, max_steps=4)
    try:
        arrays = compact.collect(9, random=True).arrays
    finally:
        compact.close()
        flat.close()
    assert len(arrays["final_frame"]) > 0
    return compact.schema, dict(arrays)


@pytest.mark.parametrize(("change", "message"), [
    (lambda a: a.__setitem__("final_frame", a["final_frame"][1:]), "one frame per row that ends an episode"),
    (lambda a: a.__setitem__("terminated", np.zeros_like(a["terminated"])), "one frame per row that ends"),
    (lambda a: a.__setitem__("history", a["history"][:, 1:]), "column 'history' is uint8\\[3, 2, 1, 6, 7\\]"),
    (lambda a: a.__setitem__("tail_frame", a["tail_frame"][:2]), "column 'tail_frame'"),
    (lambda a: a.__setitem__("frame", a["frame"][..., :1]), "column 'frame'"),
])
def test_inconsistent_compact_columns_are_refused(change: Callable[[dict], None], message: str) -> None:
    """By the schema's check, before anything is rebuilt: the reader counts such a payload as corrupt."""
    schema, arrays = _compact()
    change(arrays)
    with pytest.raises(SchemaError, match=message):
        schema.check(arrays, num_envs=3)


@pytest.mark.parametrize(("change", "message"), [
    (lambda a: a.__setitem__("final_frame", a["final_frame"][1:]), "final_frame is .* one frame per row that ends"),
    (lambda a: a.__setitem__("history", a["history"][:2]), "history is"),
    (lambda a: a.__setitem__("tail_frame", a["tail_frame"][:, :, :1]), "compact columns disagree"),
    (lambda a: a.pop("tail_frame"), "lacks"),
])
def test_the_rebuild_refuses_what_no_schema_checked(change: Callable[[dict], None], message: str) -> None:
    """Datasets are read without the run's schema: the rebuild checks what it relies on itself."""
    _, arrays = _compact()
    change(arrays)
    with pytest.raises(SchemaError, match=message):
        flat_columns(arrays)
