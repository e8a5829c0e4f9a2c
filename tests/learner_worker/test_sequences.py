"""The sequence loop's reader: which rows a sequence brings (its column from the chunk's first row, for the burn-in),
its start flags, which rows are warm enough to train on, and stored states of the wrong shape refused as corrupt."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlfleet.learner_worker.nstep import nstep_windows
from rlfleet.learner_worker.sequences import SequenceCache, trained_rows, warm_rows
from rlfleet.shared.payloads.schema import ChunkSchema
from rlfleet.shared.storage.local import LocalStore
from tests.support.sequences import HIDDEN, SPACES, StoredSequences, core_chunk


def test_rows_are_warm_after_burn_in_rows_or_once_their_episode_began_in_the_chunk() -> None:
    starts = np.zeros((6, 3), bool)
    starts[3, 1] = True  # env 1's episode ended on row 2: its state is zeroed before row 3
    state = np.ones((3, 2, 4), np.float32)
    state[2] = 0.0  # env 2's first row begins an episode: nothing stale to burn in
    warm = warm_rows(starts, state, burn_in=4)
    np.testing.assert_array_equal(warm[:, 0], [False, False, False, False, True, True])
    np.testing.assert_array_equal(warm[:, 1], [False, False, False, True, True, True])
    assert warm[:, 2].all()
    assert warm_rows(starts, state, burn_in=0).all()


def test_a_sequence_brings_its_column_from_the_chunks_first_row_and_its_own_rows(tmp_path: Path) -> None:
    chunks = [core_chunk(0), core_chunk(1)]
    for chunk in chunks:
        chunk["terminated"][:] = chunk["truncated"][:] = False
    chunks[1]["terminated"][2, 0] = True  # an end inside chunk 1's env 0, before its sequence
    stored = StoredSequences(tmp_path, chunks)
    cache = stored.cache(burn_in=3, n_step=3)
    (batch,) = cache.batches(stored.sample([(0, 4, 1), (1, 1, 0)], length=4, batch_size=2))
    order = list(batch["ids"] - 100)  # the batch is shuffled; ids say which item each column is
    (zero,), (one,) = (np.flatnonzero(np.asarray(order) == k) for k in (0, 1))
    # item 0: chunk 0, env 1, rows 4..7; its targets bootstrap up to row 9, so rows 0..9 come for the unroll
    assert batch["obs"].shape == (10, 2, 3) and batch["first"][zero] == 4
    np.testing.assert_array_equal(batch["obs"][:, zero], chunks[0]["obs"][:, 1])
    np.testing.assert_array_equal(batch["state"][zero], chunks[0]["core_state"][1])
    np.testing.assert_array_equal(batch["actions"][:, zero], chunks[0]["actions"][4:8, 1])
    returns, boot, discount = nstep_windows(chunks[0]["rewards"], chunks[0]["terminated"], chunks[0]["truncated"],
                                            0.9, 3)
    np.testing.assert_allclose(batch["returns"][:, zero], returns[4:8, 1])
    np.testing.assert_array_equal(batch["boot"][:, zero], boot[4:8, 1])
    np.testing.assert_array_equal(batch["boot"][:, zero], [6, 7, 8, 9])
    assert batch["trained"][:, zero].all()  # rows 4.. have 3 rows of burn-in before them
    # item 1: chunk 1, env 0, rows 1..4, its episode ended on row 2: row 3 starts a fresh state
    np.testing.assert_array_equal(batch["starts"][:7, one], [False, False, False, True, False, False, False])
    np.testing.assert_allclose(batch["discount"][:, one], [0.0, 0.0, 0.9**3, 0.9**3])  # rows 1, 2 end at row 2
    np.testing.assert_array_equal(batch["obs"][:7, one], chunks[1]["obs"][:7, 0])
    np.testing.assert_array_equal(batch["obs"][7:, one], 0.0)  # padding past the rows its targets read
    # rows 1 and 2 have fewer than 3 rows of warm-up and no reset before them; rows 3 and 4 follow the reset
    np.testing.assert_array_equal(batch["trained"][:, one], [False, False, True, True])
    np.testing.assert_array_equal(batch["weights"][[zero, one]], np.array([0.5, 0.6], np.float32))
    observed = trained_rows(batch)
    assert len(observed) == 6 and set(observed[:, 1].tolist()) == {3.0, 4.0, 5.0, 6.0, 7.0}


def test_invalid_rows_are_zeroed_never_trained_and_start_a_fresh_state(tmp_path: Path) -> None:
    chunk = core_chunk(2)
    chunk["terminated"][:] = chunk["truncated"][:] = False
    chunk["valid"][5, 0] = False
    chunk["obs"][5, 0] = np.nan  # a failed step may hold anything
    stored = StoredSequences(tmp_path, [chunk])
    (batch,) = stored.cache(burn_in=2).batches(stored.sample([(0, 3, 0)], length=5, batch_size=1))
    assert np.isfinite(batch["obs"]).all() and (batch["obs"][5, 0] == 0).all()
    assert batch["starts"][6, 0] and not batch["starts"][:6, 0].any()
    np.testing.assert_array_equal(batch["trained"][:, 0], [True, True, False, True, True])  # rows 3..7
    np.testing.assert_array_equal(batch["boot"][:2, 0], [4, 4])  # n-step windows stop before the failed step


def test_a_stored_state_of_the_wrong_shape_is_refused_as_corrupt_and_never_batched(tmp_path: Path) -> None:
    bad = core_chunk(3)
    bad["core_state"] = np.zeros((2, HIDDEN + 1), np.float32)
    stored = StoredSequences(tmp_path, [bad, core_chunk(4)])
    cache = stored.cache(burn_in=2)
    batches = cache.batches(stored.sample([(0, 2, 0), (1, 2, 0), (1, 3, 1)], length=4, batch_size=1))
    assert sorted(int(b["ids"][0]) for b in batches) == [101, 102]  # only the good chunk's items
    assert cache.corrupt == 1
    ((chunk_id, reason),) = cache.take_corrupt()
    assert chunk_id == "chunk0" and "core_state" in reason


def test_a_run_whose_chunks_carry_no_core_state_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="set algo.net.core"):
        SequenceCache(LocalStore(tmp_path), ChunkSchema.of(SPACES, behaviour_logp=False), 0.9, 3, 2, max_chunks=4)


def test_a_sequence_after_an_episode_start_brings_its_rows_from_that_start_only(tmp_path: Path) -> None:
    """The rows before an episode start cannot change the state after it: the span begins there, so no start flag
    is left inside it for the core to split its unroll at."""
    chunk = core_chunk(5)
    chunk["terminated"][:] = chunk["truncated"][:] = False
    chunk["terminated"][[1, 3], 1] = True  # env 1's episodes begin on rows 2 and 4
    stored = StoredSequences(tmp_path, [chunk])
    (batch,) = stored.cache(burn_in=3).batches(stored.sample([(0, 5, 1)], length=3, batch_size=1))
    assert batch["first"][0] == 1  # row 5, one row after the span's first (row 4)
    np.testing.assert_array_equal(batch["obs"][:, 0], chunk["obs"][4:10, 1])
    np.testing.assert_array_equal(batch["starts"][:, 0], [True, False, False, False, False, False])
    np.testing.assert_array_equal(batch["boot"][:, 0], [3, 4, 5])  # rows 7, 8, 9 of the chunk, in the span
    assert batch["trained"][:, 0].all()  # its episode began inside the chunk: no burn-in needed
