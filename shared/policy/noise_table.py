"""The shared noise table of population-based learners (Salimans et al. 2017): perturbations by reference.

Every process builds the same table from (seed, size) with numpy's default generator (float32 standard
normals), so a perturbation travels as one integer offset and a sign, never as a vector: member k of a
generation evaluates `theta + sign * sigma * table[index : index + dim]`. The table stays numpy-only so
collectors remain torch-free; a process builds each table once (`noise_table` caches it).

Offsets are drawn uniformly from the `size - dim + 1` distinct ones; an antithetic pair shares its offset. A
population needing more distinct offsets than the table holds would repeat perturbations within a generation,
so `check_capacity` refuses it before the run starts (in the preflight, through the algorithm's own checks).
"""

from __future__ import annotations

import functools

import numpy as np

MIN_SIZE, MAX_SIZE = 1024, 2**28  # 1 GiB of float32 at most


class NoiseTable:
    def __init__(self, seed: int, size: int) -> None:
        if not MIN_SIZE <= size <= MAX_SIZE:
            raise ValueError(f"noise table size {size} outside [{MIN_SIZE}, {MAX_SIZE}]")
        self.seed, self.size = seed, size
        self.noise = np.random.default_rng(seed).standard_normal(size, dtype=np.float32)
        self.noise.flags.writeable = False  # shared by every evaluation in the process

    def offsets(self, dim: int) -> int:
        """How many distinct perturbations of a `dim`-parameter vector the table holds."""
        return max(0, self.size - dim + 1)

    def get(self, index: int, dim: int) -> np.ndarray:
        """The perturbation at `index` (a read-only view); refuses offsets past the table's end."""
        if not 0 <= index < self.offsets(dim):
            raise ValueError(f"noise index {index} outside [0, {self.offsets(dim)}) for {dim} parameters")
        return self.noise[index:index + dim]

    def sample(self, rng: np.random.Generator, dim: int, count: int) -> np.ndarray:
        """`count` distinct offsets for `dim`-parameter perturbations."""
        check_capacity(self.size, dim, count)
        return rng.choice(self.offsets(dim), size=count, replace=False).astype(np.int64)


def check_capacity(size: int, dim: int, count: int) -> None:
    """Refuse `count` distinct perturbations of `dim` parameters from a table of `size` entries, naming the fix."""
    offsets = max(0, size - dim + 1)
    if count > offsets:
        raise ValueError(f"the noise table holds {offsets} distinct perturbations of the policy's {dim} parameters "
                         f"(noise_table_size {size} - {dim} + 1), the population needs {count}: raise "
                         f"noise_table_size to at least {dim - 1 + count} or shrink the population")


@functools.lru_cache(maxsize=2)
def noise_table(seed: int, size: int) -> NoiseTable:
    """The process's table for (seed, size), built once."""
    return NoiseTable(seed, size)
