"""shared/noise_table.py: every process builds the same table from (seed, size); offsets are bounded and
distinct; a population the table cannot perturb distinctly is refused when its config loads."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from pydantic import ValidationError

from shared.config import RunConfig
from shared.noise_table import MIN_SIZE, NoiseTable, check_capacity, noise_table

# CartPole's ES policy (4 -> 16 -> 2): 4 * 16 + 16 + 16 * 2 + 2 parameters
CARTPOLE_DIM = 114


def test_same_seed_and_size_give_the_same_table_in_another_process() -> None:
    table = NoiseTable(seed=7, size=4096)
    child = subprocess.run(
        [sys.executable, "-c", "import sys; from shared.noise_table import NoiseTable; "
         "sys.stdout.buffer.write(NoiseTable(7, 4096).noise.tobytes())"],
        capture_output=True, check=True, timeout=60)
    np.testing.assert_array_equal(np.frombuffer(child.stdout, np.float32), table.noise)
    assert table.noise.dtype == np.float32 and table.noise.shape == (4096,)


def test_different_seeds_give_different_tables_and_tables_are_standard_normal() -> None:
    a, b = NoiseTable(1, 2**16), NoiseTable(2, 2**16)
    assert not np.array_equal(a.noise, b.noise)
    assert abs(float(a.noise.mean())) < 0.02 and abs(float(a.noise.std()) - 1) < 0.02


def test_table_is_read_only_and_cached_per_process() -> None:
    table = noise_table(3, MIN_SIZE)
    assert noise_table(3, MIN_SIZE) is table
    with pytest.raises(ValueError, match="read-only"):
        table.noise[0] = 1.0


@pytest.mark.parametrize("size", [MIN_SIZE - 1, 2**28 + 1])
def test_size_outside_bounds_refused(size: int) -> None:
    with pytest.raises(ValueError, match="noise table size"):
        NoiseTable(0, size)


def test_get_returns_the_slice_and_refuses_offsets_past_the_end() -> None:
    table = NoiseTable(0, MIN_SIZE)
    dim = 100
    assert table.offsets(dim) == MIN_SIZE - dim + 1
    np.testing.assert_array_equal(table.get(5, dim), table.noise[5:5 + dim])
    last = table.offsets(dim) - 1
    assert table.get(last, dim).shape == (dim,)
    for bad in (-1, last + 1):
        with pytest.raises(ValueError, match=f"noise index {bad} outside"):
            table.get(bad, dim)
    assert table.offsets(MIN_SIZE + 5) == 0


def test_sample_gives_distinct_offsets_in_range_and_is_reproducible() -> None:
    table = NoiseTable(0, MIN_SIZE)
    dim, count = 1000, 25  # only 25 distinct offsets: all of them must come out
    offsets = table.sample(np.random.default_rng(0), dim, count)
    assert offsets.dtype == np.int64
    assert sorted(offsets.tolist()) == list(range(25))
    many = table.sample(np.random.default_rng(1), 10, 500)
    assert len(set(many.tolist())) == 500 and many.min() >= 0 and many.max() < table.offsets(10)
    np.testing.assert_array_equal(many, table.sample(np.random.default_rng(1), 10, 500))
    with pytest.raises(ValueError, match="noise_table_size"):
        table.sample(np.random.default_rng(0), dim, count + 1)


def test_check_capacity_names_the_fix() -> None:
    check_capacity(2000, 1000, 1001)  # exactly the table's distinct offsets
    with pytest.raises(ValueError, match=r"holds 1001 distinct.*raise noise_table_size to at least 2001"):
        check_capacity(2000, 1000, 1002)


def es_config(**algo: object) -> RunConfig:
    return RunConfig.model_validate({"env": {"id": "CartPole-v1"}, "algo": {"name": "es", **algo}})


def test_config_with_a_population_the_table_cannot_hold_refused_at_load() -> None:
    offsets = MIN_SIZE - CARTPOLE_DIM + 1
    assert es_config(population=2 * offsets, noise_table_size=MIN_SIZE).algo.population == 2 * offsets
    with pytest.raises(ValidationError, match=r"algo\.population / algo\.noise_table_size") as info:
        es_config(population=2 * offsets + 2, noise_table_size=MIN_SIZE)
    assert f"{offsets} distinct perturbations of the policy's {CARTPOLE_DIM} parameters" in str(info.value)


def test_odd_population_refused() -> None:
    with pytest.raises(ValidationError, match=r"population \(5\) must be even"):
        es_config(population=5)
