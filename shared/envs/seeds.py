"""Env seeds for every mode, derived from the run seed so that no two envs of a run ever share one.

AllenAct's worker-seeds idea, made collision-free by construction: a vector env of N envs is reset with one
base seed and gymnasium seeds its envs base, base + 1, ..., base + N - 1 (an env's own vectorized
implementation, which the evaluator plays on where gymnasium registers one, seeds its single generator with
base instead). Bases are mixed-radix numbers

    base = (((run_seed * 3 + mode) * 2**20 + task) * 2**24 + counter) * 4096

so each (run seed, mode, task, counter) owns a block of 4096 seeds (num_envs is at most 256) and different
tuples own disjoint blocks:

* mode: train (collectors), valid (the periodic evaluation), test (held-out confirmation): test seeds can
  never coincide with a training or validation seed.
* task: the collector task's index (never reused, also when tasks are pruned), 0 for the evaluator's
  validation and the run's own tests, 1 for `rlfleet test` re-runs after the fact, 1 + k for the evaluation
  (and test) an operator asked for with the k-th `POST /v1/run/evaluate`.
* counter: how often that collector task was claimed (a restarted or rescheduled collector continues with
  a fresh block, never an earlier sequence), the policy version for validation, the test's number for tests.

Population evaluation (evolution strategies) draws its blocks in train mode from a task index no collector task
reaches (`POPULATION_TASK`, the scheme's last), with the generation number as the counter: every member of a
generation plays the same episode seeds (common random numbers: an antithetic pair differs only by its
perturbation), and every generation gets fresh ones.

An actor's own random stream (exploration, sampling) is seeded with [base, 1], a different stream from the
env's.
"""

from __future__ import annotations

from typing import Literal

Mode = Literal["train", "valid", "test"]
MODES: dict[Mode, int] = {"train": 0, "valid": 1, "test": 2}
ENVS_PER_BLOCK = 4096
MAX_TASK, MAX_COUNTER = 2**20, 2**24
MAX_RUN_SEED = 2**31 - 1
ACTOR_STREAM = 1
OPPONENT_STREAM = 2  # self-play opponents' random moves in a collector
RETEST_TASK = 1  # the task index of `rlfleet test` re-runs after the fact
POPULATION_TASK = MAX_TASK - 1  # train mode: population evaluation; collector tasks would need 2**20 - 1 claims


def operator_task(request: int) -> int:
    """The task index of the evaluation an operator asked for with request number `request` (from 1)."""
    return RETEST_TASK + request


def base_seed(run_seed: int, mode: Mode, task: int, counter: int) -> int:
    """The seed of env 0 of that vector env; env i gets base + i."""
    if not 0 <= run_seed <= MAX_RUN_SEED:
        raise ValueError(f"run seed {run_seed} outside [0, {MAX_RUN_SEED}]")
    if not 0 <= task < MAX_TASK or not 0 <= counter < MAX_COUNTER:
        raise ValueError(f"task {task} or counter {counter} outside the seed scheme's range")
    return (((run_seed * len(MODES) + MODES[mode]) * MAX_TASK + task) * MAX_COUNTER + counter) * ENVS_PER_BLOCK


def population_seed(run_seed: int, generation: int) -> int:
    """The seed block every member of `generation` plays (episode i: base + i)."""
    return base_seed(run_seed, "train", POPULATION_TASK, generation)


def decode(base: int) -> tuple[int, Mode, int, int]:
    """(run seed, mode, task, counter) of a base seed: what status and summary.json show for each seed used."""
    block, offset = divmod(base, ENVS_PER_BLOCK)
    if offset:
        raise ValueError(f"{base} is not a base seed of this scheme")
    rest, counter = divmod(block, MAX_COUNTER)
    rest, task = divmod(rest, MAX_TASK)
    run_seed, mode = divmod(rest, len(MODES))
    return run_seed, next(m for m, code in MODES.items() if code == mode), task, counter
