"""The seed scheme: 32-bit seeds, disjoint blocks per (mode, task, counter) within a run, keyed by the run seed,
decodable, bounded."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlfleet.shared.envs.seeds import (
    ENVS_PER_BLOCK,
    MAX_RUN_SEED,
    MODES,
    POPULATION,
    POPULATION_TASK,
    REGIONS,
    Mode,
    base_seed,
    decode,
    population_seed,
)

RUN_SEEDS = st.integers(0, MAX_RUN_SEED)
KEYS = st.sampled_from(MODES).flatmap(lambda mode: st.tuples(
    st.just(mode), st.integers(0, REGIONS[mode].tasks - 1), st.integers(0, REGIONS[mode].counters - 1)))


@given(RUN_SEEDS, KEYS)
def test_every_env_seed_of_a_block_is_below_2_to_the_32(run_seed: int, key: tuple) -> None:
    base = base_seed(run_seed, *key)
    assert base >= 0 and base + ENVS_PER_BLOCK - 1 < 2**32


@given(RUN_SEEDS, KEYS, KEYS)
def test_different_keys_of_a_run_own_disjoint_blocks(run_seed: int, a: tuple, b: tuple) -> None:
    if a != b:
        assert abs(base_seed(run_seed, *a) - base_seed(run_seed, *b)) >= ENVS_PER_BLOCK


@given(RUN_SEEDS, KEYS)
def test_a_base_decodes_to_its_key(run_seed: int, key: tuple) -> None:
    assert decode(run_seed, base_seed(run_seed, *key)) == key


def test_no_collision_over_a_large_grid_of_a_run() -> None:
    """Every mode, the first collector tasks and operator evaluations, many claims and versions, and population
    generations: 1 block each, none shared (the blocks are what env seeds base .. base + 511 come from)."""
    keys: list[tuple[Mode, int, int]] = [("train", task, claim)
                                         for task, claim in itertools.product(range(64), range(64))]
    keys += [(mode, task, counter) for mode in ("valid", "test") for task, counter
             in itertools.product(range(REGIONS[mode].tasks), range(0, 2**17, 97))]
    keys += [("train", POPULATION_TASK, generation) for generation in range(0, 2**21, 1009)]
    for run_seed in (0, 1, 12345, MAX_RUN_SEED):
        bases = [base_seed(run_seed, *key) for key in keys]
        assert len(set(bases)) == len(keys)
        assert all(decode(run_seed, base) == key for base, key in zip(bases, keys, strict=True))


def test_runs_with_other_seeds_play_other_seeds() -> None:
    assert len({base_seed(run_seed, "train", 0, 1) for run_seed in range(100)}) == 100


def test_population_generations_decode_as_train_mode_population_blocks() -> None:
    assert decode(7, population_seed(7, 5000)) == ("train", POPULATION_TASK, 5000)
    assert POPULATION.counters > 2**20  # ES runs of a million generations fit


def test_modes_never_share_seeds_for_the_same_task_and_counter() -> None:
    assert len({base_seed(7, mode, 3, 5) for mode in MODES}) == 3


@pytest.mark.parametrize("key", [(-1, "train", 0, 0), (2**31, "train", 0, 0), (0, "train", 2**9, 0),
                                 (0, "train", 0, 2**12), (0, "valid", 16, 0), (0, "test", 0, -1),
                                 (0, "train", POPULATION_TASK, 2**21)])
def test_keys_outside_the_bounds_are_refused_saying_which(key: tuple) -> None:
    with pytest.raises(ValueError, match="outside"):
        base_seed(*key)


def test_policy_versions_past_the_region_wrap_within_their_mode() -> None:
    """A long IMPALA run publishes more than 2**17 versions; validating one must not end the evaluator."""
    for mode in ("valid", "test"):
        wrapped = base_seed(7, mode, 0, 2**17 + 5)
        assert wrapped == base_seed(7, mode, 0, 5) and decode(7, wrapped) == (mode, 0, 5)
    with pytest.raises(ValueError, match="outside"):
        base_seed(7, "train", 0, 2**12)  # training seeds never wrap: a collector would replay episodes


def test_a_seed_that_is_no_base_is_refused() -> None:
    with pytest.raises(ValueError, match="not a base seed"):
        decode(0, base_seed(0, "train", 0, 0) + 1)
