"""One PPO update of an Atari batch per encoder and trunk: how much of the learner's time the encoder decides.

  python bench/encoders.py [--device cpu|cuda] [--threads 1 2] [--repeats 3] [--rows 1024] [--arms ...]
                           [--json out.json]

The batch is rl-baselines3-zoo's Atari PPO: 8 envs x 128 steps = 1,024 rows of 4x84x84 uint8 frame stacks
(channels first, as FrameStackObservation gives them), 4 epochs of minibatches of 256, Adam at 2.5e-4, clip 0.1,
entropy 0.01, and the MLP `net.hidden: [512]` (the Nature CNN's 512-unit layer; rl-zoo's CnnPolicy has no layer
after it). One update is what a learner does per batch: the critic's values for GAE over obs and next_obs,
then the epochs. Arms, run in turn inside every repeat (so a neighbour's load falls on all of them alike), each
figure the median over `--repeats` after one warm-up update per arm:

* cnn / separate: rlfleet's small CNN with separate actor and critic, what an image run got before encoders
  were configurable (14.5M parameters);
* nature / shared and nature / separate: the Nature CNN with the critic a value head on the actor's trunk
  (Stable-Baselines3's and CleanRL's layout, 1.69M), and with a critic of its own;
* impala / shared: the IMPALA ResNet (16, 32, 32), shared.

On the CPU each `--threads` setting is its own table (torch intra-op threads, as RLFLEET_TORCH_THREADS sets a
learner's). `--device cuda` times the same arms on the GPU (threads then only feed it). Prints parameter
counts (trained, and of the published actor), seconds per update, updates/s and rows/s. Needs torch, numpy and
pydantic only, so it runs on a bare GPU machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rlfleet.learner_worker.algorithms.ppo import PPO  # noqa: E402
from rlfleet.shared.algorithms.ppo import PPOParams  # noqa: E402
from rlfleet.shared.config.base import NetConfig  # noqa: E402
from rlfleet.shared.payloads.spaces import DiscreteActions, ObsSpace, Spaces  # noqa: E402
from rlfleet.shared.policy.manifest import Behaviour  # noqa: E402

SPACES = Spaces(obs=ObsSpace(shape=(4, 84, 84), dtype="uint8"), action=DiscreteActions(n=6))  # Pong's 6 actions
BEHAVIOUR = Behaviour(head="categorical", sample=True)
ENVS = 8
ARMS: dict[str, tuple[dict, str]] = {  # label: (algo.net.encoder, algo.net.trunk)
    "cnn / separate": ({"kind": "cnn"}, "separate"),
    "nature / shared": ({"kind": "nature"}, "shared"),
    "nature / separate": ({"kind": "nature"}, "separate"),
    "impala / shared": ({"kind": "impala", "channels": [16, 32, 32]}, "shared"),
}


def params_for(encoder: dict, trunk: str) -> PPOParams:
    """rl-zoo's atari PPO hyperparameters (its linear schedules at their start values)."""
    return PPOParams(net=NetConfig(hidden=(512,), activation="relu", encoder=encoder, trunk=trunk),
                     learning_rate=2.5e-4, gamma=0.99, gae_lambda=0.95, clip_range=0.1, epochs=4, minibatch_size=256,
                     value_coef=0.5, entropy_coef=0.01, max_grad_norm=0.5)


def make_chunk(rows: int, seed: int) -> dict[str, np.ndarray]:
    """A chunk of `rows` env steps over ENVS envs, shaped as the learner reads one ([T, N, ...])."""
    rng = np.random.default_rng(seed)
    steps = rows // ENVS
    shape = (steps, ENVS)
    frames = rng.integers(0, 256, (steps + 1, ENVS, *SPACES.obs.shape), dtype=np.uint8)
    return {"obs": frames[:-1], "next_obs": frames[1:], "actions": rng.integers(0, 6, shape).astype(np.int64),
            "rewards": rng.choice([-1.0, 0.0, 1.0], shape, p=[0.01, 0.98, 0.01]).astype(np.float32),
            "terminated": rng.random(shape) < 0.001, "truncated": np.zeros(shape, bool), "valid": np.ones(shape, bool),
            "logp": np.full(shape, -np.log(6), np.float32)}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def counts(learner: PPO) -> dict[str, int]:
    return {"trained_params": sum(p.numel() for p in learner.params),
            "actor_params": sum(p.numel() for p in learner.actor.parameters())}


def measure(device: torch.device, threads: int, repeats: int, rows: int, arms: list[str]) -> list[dict]:
    """Median seconds per update of each of `arms` at `threads` intra-op threads on `device`."""
    torch.set_num_threads(threads)
    chunks = [make_chunk(rows, seed) for seed in range(2)]
    learners = {label: PPO(SPACES, params_for(*ARMS[label]), BEHAVIOUR, seed=0, device=device) for label in arms}
    for learner in learners.values():
        learner.update([chunks[0]])  # warm-up: allocator, kernels, Adam's state
    seconds: dict[str, list[float]] = {label: [] for label in learners}
    for repeat in range(repeats):
        for label, learner in learners.items():
            sync(device)
            start = time.perf_counter()
            learner.update([chunks[(repeat + 1) % 2]])
            sync(device)
            seconds[label].append(time.perf_counter() - start)
    out = []
    for label, learner in learners.items():
        median = statistics.median(seconds[label])
        out.append({"device": str(device), "threads": threads, "arm": label, **counts(learner),
                    "seconds_per_update": round(median, 4), "updates_per_s": round(1 / median, 3),
                    "rows_per_s": round(rows / median, 1), "repeats": seconds[label]})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                        help="torch intra-op thread counts to time, one table each")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=1024, help="env steps per update (a multiple of 8)")
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS), metavar="ARM",
                        help=f"which arms to time (default all): {', '.join(repr(a) for a in ARMS)}")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.rows % ENVS or args.rows < ENVS:
        parser.error(f"--rows must be a positive multiple of {ENVS} (the envs of one chunk)")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here (torch.cuda.is_available() is False)")
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"torch {torch.__version__} on {name}; {args.rows} rows of 4x84x84 uint8, 4 epochs x minibatch 256, "
          f"median of {args.repeats}")
    rows = []
    for threads in args.threads:
        print(f"\n{device.type}, {threads} torch thread(s)")
        print(f"{'arm':<20}{'trained':>12}{'actor':>12}{'s/update':>11}{'updates/s':>11}{'rows/s':>10}")
        for row in measure(device, threads, args.repeats, args.rows, args.arms):
            rows.append(row)
            print(f"{row['arm']:<20}{row['trained_params']:>12,}{row['actor_params']:>12,}"
                  f"{row['seconds_per_update']:>11.3f}{row['updates_per_s']:>11.3f}{row['rows_per_s']:>10.1f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
