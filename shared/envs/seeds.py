"""Env seeds for every mode, derived from the run seed: below 2**32, and never shared by two envs of a run.

Many envs take only 32-bit seeds (np.random.RandomState: MinAtar; ALE), so every seed rlfleet hands out is in
[0, 2**32). AllenAct's worker-seeds idea, made collision-free by construction: a vector env of N envs is reset
with one base seed and gymnasium seeds its envs base, base + 1, ..., base + N - 1 (an env's own vectorized
implementation, which the evaluator plays on where gymnasium registers one, seeds its single generator with
base instead). A seed is

    seed = keyed(block) * 512 + env

where env < 512 (num_envs is at most 256; `rlfleet test --video` plays one more episode at base + num_envs) and
`block` is a 23-bit number that lays out (mode, task, counter) in disjoint regions:

    region       blocks   task                         counter
    train        2**21    collector task, < 512        claims of the task, < 4096
    population   2**21    POPULATION_TASK              population generation, < 2**21
    valid        2**21    < 16                         policy version, < 2**17
    test         2**21    < 16                         policy version or test number, < 2**17

`keyed` is a bijection of the 23-bit numbers chosen by the run seed (x -> (a * x + b) mod 2**23 with a odd), so
runs with different seeds play different seeds while two (mode, task, counter) of one run never share a block.
A train or population key outside these bounds raises ValueError saying which bound: they are sized for real runs
(512 collectors at once, each slot restarted thousands of times, a 64-collector fleet's two million population
generations), and a silent wrap would replay training seeds. Validation and test counters (policy versions) wrap
instead: an asynchronous learner may publish ten versions a second, so a long run passes 131,072, and a version that
far apart playing the same episode seeds is harmless (validation only ranks policies; a held-out test stays disjoint
from every training and validation seed, which is what confirmation needs). The coordinator creates no collector
task past COLLECTOR_TASKS (a collector beyond it waits for a free one, as any collector does).

* mode: train (collectors), valid (the periodic evaluation), test (held-out confirmation): test seeds can
  never coincide with a training or validation seed.
* task: the collector task's index (never reused, also when tasks are pruned), 0 for the evaluator's
  validation and the run's own tests, 1 for `rlfleet test` re-runs after the fact, 1 + k for the evaluation
  (and test) an operator asked for with the k-th `POST /v1/run/evaluate`.
* counter: how often that collector task was claimed (a restarted or rescheduled collector continues with
  a fresh block, never an earlier sequence), the policy version for validation, the test's number for tests.

Population evaluation (evolution strategies) draws its blocks in train mode from a task index no collector task
reaches (`POPULATION_TASK`), with the generation number as the counter: every member of a generation plays the
same episode seeds (common random numbers: an antithetic pair differs only by its perturbation), and every
generation gets fresh ones.

An actor's own random stream (exploration, sampling) is seeded with [base, 1], a different stream from the
env's. `decode(run_seed, base)` gives back (mode, task, counter): what status and summary.json's seeds_used
mean.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

Mode = Literal["train", "valid", "test"]
MODES: tuple[Mode, ...] = ("train", "valid", "test")
ENVS_PER_BLOCK = 512
BLOCK_BITS = 23  # 23 + 9 (ENVS_PER_BLOCK) = 32
MAX_RUN_SEED = 2**31 - 1
ACTOR_STREAM = 1
OPPONENT_STREAM = 2  # self-play opponents' random moves in a collector
RETEST_TASK = 1  # the task index of `rlfleet test` re-runs after the fact


@dataclass(frozen=True)
class Region:
    """Where one kind of block lives in the 23-bit layout: tasks x counters blocks from `start`."""

    start: int
    tasks: int
    counters: int

    @property
    def end(self) -> int:
        return self.start + self.tasks * self.counters


TRAIN = Region(0, 2**9, 2**12)
POPULATION = Region(TRAIN.end, 1, 2**21)
REGIONS: dict[Mode, Region] = {"train": TRAIN, "valid": Region(POPULATION.end, 2**4, 2**17)}
REGIONS["test"] = Region(REGIONS["valid"].end, 2**4, 2**17)
COLLECTOR_TASKS = TRAIN.tasks  # collector task indices the scheme has blocks for
POPULATION_TASK = 2**20 - 1  # train mode: population evaluation; far past any collector task index, so a task
#                             index just past COLLECTOR_TASKS is refused rather than taken for population blocks
MAX_TEST_COUNTER = REGIONS["test"].counters - 1  # `rlfleet test --seed-counter`'s largest
assert REGIONS["test"].end == 2**BLOCK_BITS  # the regions tile the layout exactly


def operator_task(request: int) -> int:
    """The task index of the evaluation an operator asked for with request number `request` (from 1)."""
    return RETEST_TASK + request


def base_seed(run_seed: int, mode: Mode, task: int, counter: int) -> int:
    """The seed of env 0 of that vector env; env i gets base + i. Below 2**32 - ENVS_PER_BLOCK + 1."""
    region = POPULATION if (mode, task) == ("train", POPULATION_TASK) else REGIONS[mode]
    index = 0 if region is POPULATION else task
    if not 0 <= index < region.tasks:
        raise ValueError(f"{mode} task {task} outside the seed scheme's [0, {region.tasks}): "
                         f"{'collector tasks' if mode == 'train' else 'operator evaluations'} of one run stop there")
    if mode in ("valid", "test") and counter >= 0:
        counter %= region.counters  # policy versions wrap (see the module doc)
    if not 0 <= counter < region.counters:
        raise ValueError(f"{mode} counter {counter} outside the seed scheme's [0, {region.counters}) "
                         f"(claims of a collector task, population generations, policy versions or test numbers)")
    a, b = _key(run_seed)
    block = region.start + index * region.counters + counter
    return (a * block + b) % 2**BLOCK_BITS * ENVS_PER_BLOCK


def population_seed(run_seed: int, generation: int) -> int:
    """The seed block every member of `generation` plays (episode i: base + i)."""
    return base_seed(run_seed, "train", POPULATION_TASK, generation)


def decode(run_seed: int, base: int) -> tuple[Mode, int, int]:
    """(mode, task, counter) of a base seed of run `run_seed`: what status and summary.json's seeds_used mean."""
    keyed, offset = divmod(base, ENVS_PER_BLOCK)
    if offset or not 0 <= keyed < 2**BLOCK_BITS:
        raise ValueError(f"{base} is not a base seed of this scheme")
    a, b = _key(run_seed)
    block = (keyed - b) * pow(a, -1, 2**BLOCK_BITS) % 2**BLOCK_BITS
    if POPULATION.start <= block < POPULATION.end:
        return "train", POPULATION_TASK, block - POPULATION.start
    mode = next(m for m, r in REGIONS.items() if r.start <= block < r.end)
    task, counter = divmod(block - REGIONS[mode].start, REGIONS[mode].counters)
    return mode, task, counter


def _key(run_seed: int) -> tuple[int, int]:
    """The run's bijection of blocks (a odd, b): from a hash that is the same in every process and version."""
    if not 0 <= run_seed <= MAX_RUN_SEED:
        raise ValueError(f"run seed {run_seed} outside [0, {MAX_RUN_SEED}]")
    digest = hashlib.blake2b(run_seed.to_bytes(4, "little"), digest_size=8, person=b"rlfleet-seeds").digest()
    word = int.from_bytes(digest, "little")
    return (word & (2**BLOCK_BITS - 1)) | 1, (word >> 32) & (2**BLOCK_BITS - 1)
