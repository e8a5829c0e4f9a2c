"""The shared noise table: the same table in every process from (seed, size), offsets within bounds, and a
population the table cannot serve refused when the config loads."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest
from pydantic import ValidationError

from rlfleet.shared.config.preflight import preflight
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.policy.noise_table import NoiseTable, check_capacity, noise_table


def _digest(table: NoiseTable) -> str:
    return hashlib.sha256(table.noise.tobytes()).hexdigest()


def test_another_process_builds_the_identical_table() -> None:
    here = _digest(NoiseTable(7, 50_000))
    code = ("import hashlib; from shared.policy.noise_table import NoiseTable; "
            "print(hashlib.sha256(NoiseTable(7, 50_000).noise.tobytes()).hexdigest())")
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert there == here


def test_the_seed_decides_the_table() -> None:
    a, b = NoiseTable(1, 4096), NoiseTable(2, 4096)
    assert a.noise.dtype == np.float32 and a.noise.shape == (4096,)
    assert not np.array_equal(a.noise, b.noise)
    assert abs(float(a.noise.mean())) < 0.1 and 0.9 < float(a.noise.std()) < 1.1  # standard normals


def test_the_table_is_read_only_and_cached_per_process() -> None:
    table = noise_table(3, 2048)
    assert noise_table(3, 2048) is table
    with pytest.raises(ValueError):
        table.noise[0] = 1.0


def test_get_returns_the_slice_and_refuses_offsets_past_the_end() -> None:
    table = NoiseTable(0, 2048)
    assert table.offsets(100) == 1949
    np.testing.assert_array_equal(table.get(1948, 100), table.noise[1948:2048])
    for bad in (-1, 1949):
        with pytest.raises(ValueError, match="noise index"):
            table.get(bad, 100)


def test_sample_draws_distinct_offsets_that_leave_room_for_the_vector() -> None:
    table = NoiseTable(0, 2048)
    offsets = table.sample(np.random.default_rng(0), 2000, 40)
    assert len(set(offsets.tolist())) == 40 and offsets.min() >= 0 and offsets.max() < 49
    with pytest.raises(ValueError, match="noise_table_size"):
        table.sample(np.random.default_rng(0), 2000, 50)


def test_check_capacity_names_the_size_it_needs() -> None:
    check_capacity(1024, 1000, 25)
    with pytest.raises(ValueError, match="raise noise_table_size to at least 1025"):
        check_capacity(1024, 1000, 26)


def _es_config(**algo: object) -> RunConfig:
    """An ES run on CartPole, validated and preflighted (the table's capacity depends on the env's spaces)."""
    return preflight(RunConfig.model_validate({"name": "es", "env": {"id": "CartPole-v1"},
                                               "algo": {"name": "es", **algo}})).config


def test_a_population_the_table_cannot_serve_is_refused_at_load() -> None:
    # CartPole's 4-16-2 policy has 114 parameters: a table of 1,024 entries holds 911 distinct perturbations.
    _es_config(population=1822, noise_table_size=1024)
    with pytest.raises(ValidationError, match=r"algo.population / algo.noise_table_size.*at least 1025"):
        _es_config(population=1824, noise_table_size=1024)


def test_an_odd_population_is_refused() -> None:
    with pytest.raises(ValidationError, match="antithetic pairs"):
        _es_config(population=33)
