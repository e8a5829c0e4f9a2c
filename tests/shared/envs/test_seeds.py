"""The seed scheme: disjoint blocks per (run seed, mode, task, counter), decodable, bounded."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.envs.seeds import ENVS_PER_BLOCK, MAX_COUNTER, MAX_RUN_SEED, MAX_TASK, MODES, base_seed, decode

KEYS = st.tuples(st.integers(0, MAX_RUN_SEED), st.sampled_from(sorted(MODES)), st.integers(0, MAX_TASK - 1),
                 st.integers(0, MAX_COUNTER - 1))


@given(KEYS, KEYS)
def test_different_keys_own_disjoint_blocks(a: tuple, b: tuple) -> None:
    if a != b:
        assert abs(base_seed(*a) - base_seed(*b)) >= ENVS_PER_BLOCK


@given(KEYS)
def test_a_base_decodes_to_its_key(key: tuple) -> None:
    assert decode(base_seed(*key)) == key


def test_modes_never_share_seeds_for_the_same_task_and_counter() -> None:
    bases = {mode: base_seed(7, mode, 3, 5) for mode in MODES}  # type: ignore[arg-type]
    assert len(set(bases.values())) == 3


@pytest.mark.parametrize("key", [(-1, "train", 0, 0), (0, "train", MAX_TASK, 0), (0, "test", 0, MAX_COUNTER)])
def test_out_of_range_keys_are_refused(key: tuple) -> None:
    with pytest.raises(ValueError):
        base_seed(*key)
