"""Learner throughput with 1 vs 2 learners (a learner group on gloo), measured in one run.

    python bench/learner_group.py [--steps 300] [--repeats 3] [--batch 256] [--hidden 256 256]

DQN's update on a fixed replay batch, as the learner runs it: one learner trains on the whole batch; a group of
two ranks (torch.multiprocessing, gloo on loopback, one torch thread each, as `rlfleet learner` sets) trains on
half each, DistributedDataParallel averaging gradients, with the per-update weight digest every group update
pays for (and, for its cost, without it). Prints gradient steps per second and transitions trained per second
(steps x the whole batch), medians of `--repeats` interleaved runs, and the 2-vs-1 ratio. On a 2-core machine
the two ranks share the cores with each other (and whatever else runs), so a ratio near or below 1 is expected:
the group's point is a model or sample rate beyond one process or one GPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlfleet.learner_worker.algorithms.dqn import DQN  # noqa: E402
from rlfleet.learner_worker.distributed import Group, digest  # noqa: E402
from rlfleet.shared.algorithms.dqn import DQNParams  # noqa: E402
from rlfleet.shared.config.base import NetConfig  # noqa: E402
from rlfleet.shared.payloads.spaces import DiscreteActions, ObsSpace, Spaces  # noqa: E402
from rlfleet.shared.policy.manifest import Behaviour  # noqa: E402

SPACES = Spaces(obs=ObsSpace(shape=(4,), dtype="float32"), action=DiscreteActions(n=2))
BEHAVIOUR = Behaviour(head="q_values", sample=False)


def batch(size: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"obs": rng.normal(size=(size, 4)).astype(np.float32), "actions": rng.integers(0, 2, size),
            "returns": rng.normal(size=size).astype(np.float32),
            "boot_obs": rng.normal(size=(size, 4)).astype(np.float32), "discount": np.full(size, 0.99, np.float32)}


def steps_per_second(learner: DQN, rows: dict[str, np.ndarray], steps: int, group: Group | None) -> float:
    for _ in range(10):  # warm-up: allocator, DDP buckets
        learner.update(rows)
    started = time.perf_counter()
    for step in range(steps):
        learner.update(rows)
        if group is not None:
            group.check_weights(step)
    return steps / (time.perf_counter() - started)


def _rank(rank: int, port: int, args: argparse.Namespace, check: bool, results: mp.SimpleQueue) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    group = Group.join(torch.device("cpu"), digest([b"bench"]))
    learner = DQN(SPACES, DQNParams(net=NetConfig(hidden=tuple(args.hidden)), batch_size=args.batch), BEHAVIOUR, 0)
    learner.join(group)
    rate = steps_per_second(learner, batch(args.batch // 2, rank), args.steps, group if check else None)
    group.leave()
    if rank == 0:
        results.put(rate)


def one(args: argparse.Namespace) -> float:
    torch.set_num_threads(1)
    learner = DQN(SPACES, DQNParams(net=NetConfig(hidden=tuple(args.hidden)), batch_size=args.batch), BEHAVIOUR, 0)
    return steps_per_second(learner, batch(args.batch, 0), args.steps, None)


def two(args: argparse.Namespace, check: bool = True) -> float:
    from rlfleet.launcher.up import free_port

    results: mp.SimpleQueue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(_rank, args=(free_port(), args, check, results), nprocs=2, join=True)
    return float(results.get())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256])
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"1 learner": [], "2 learners": [], "2, no digest": []}
    for _ in range(args.repeats):  # interleaved, so drifting load on the machine hits all alike
        rates["1 learner"].append(one(args))
        rates["2 learners"].append(two(args))
        rates["2, no digest"].append(two(args, check=False))
    print(f"DQN update, batch {args.batch}, MLP {args.hidden}, CPU, {args.steps} steps x {args.repeats} repeats")
    for name, runs in rates.items():
        median = statistics.median(runs)
        print(f"{name:>13}: {median:7.1f} gradient steps/s ({median * args.batch:9.0f} transitions/s)  "
              f"runs: {', '.join(f'{r:.1f}' for r in runs)}")
    one_rate = statistics.median(rates["1 learner"])
    print(f"ratio 2 vs 1: {statistics.median(rates['2 learners']) / one_rate:.2f} "
          f"(without the per-update weight digest: {statistics.median(rates['2, no digest']) / one_rate:.2f})")


if __name__ == "__main__":
    main()
