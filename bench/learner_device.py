"""Learner updates per second on the CPU and on a GPU, for every registered algorithm, side by side.

  python bench/learner_device.py [--updates 200] [--json out.json] [--algos ppo impala] [--spaces frames]
      [--encoder '{"kind": "nature"}'] [--amp bf16] [--threads 16]

For each algorithm and each space it supports (CartPole-like flat/Discrete, Pendulum-like flat/Box, an
84x84x3 uint8 image with 6 actions, and Atari's 4 stacked 84x84 frames with 6 actions, for the CNN encoders), it
builds the learner exactly as a learner process
does (registry entry, default hyperparameters, `learner.device`), feeds synthetic batches shaped by the
run's chunk schema, and times `--updates` updates after a warm-up. It also checks what a GPU must not
change: the first update's losses agree with the CPU's (same seed, same batch), the published policy state
is readable on the CPU, and a GPU learner's checkpoint state loads into a CPU learner. Needs only torch,
numpy and pydantic (no gymnasium, no web stack), so it runs on a bare GPU machine.

`--encoder` is the config's `algo.net.encoder` for image spaces (`{"kind": "nature"}`, `{"kind": "impala",
"channels": [16, 32, 32]}`: whatever encoders the manifest declares); `--amp bf16` adds a CUDA column trained under
`learner.amp: bf16`; `--threads` is the CPU learner's torch threads (default: the cores it may use, as a learner
service's `RLFLEET_TORCH_THREADS=auto`). Batches move to CUDA as a learner's do: pinned, non-blocking
(learner_worker/device.py).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rlfleet.learner_worker.algorithms import load_learner  # noqa: E402
from rlfleet.learner_worker.threads import torch_threads  # noqa: E402
from rlfleet.shared.algorithms import REGISTRY  # noqa: E402
from rlfleet.shared.config.plan import chunk_schema  # noqa: E402
from rlfleet.shared.config.run_config import RunConfig  # noqa: E402
from rlfleet.shared.payloads.spaces import BoxActions, DiscreteActions, ObsSpace, Spaces  # noqa: E402
from rlfleet.shared.wire import LearnerTask  # noqa: E402

SPACES = {
    "flat-discrete": Spaces(obs=ObsSpace(shape=(4,), dtype="float32"), action=DiscreteActions(n=2)),
    "flat-box": Spaces(obs=ObsSpace(shape=(3,), dtype="float32"), action=BoxActions(low=(-2.0,), high=(2.0,))),
    "image-discrete": Spaces(obs=ObsSpace(shape=(84, 84, 3), dtype="uint8"), action=DiscreteActions(n=6)),
    "frames": Spaces(obs=ObsSpace(shape=(4, 84, 84), dtype="uint8"), action=DiscreteActions(n=6)),
}
CHUNKS, CHUNK_STEPS, CHUNK_ENVS = 4, 128, 4


def task_for(name: str, spaces: Spaces, device: str, encoder: dict | None = None,
             amp: str = "none") -> LearnerTask | None:
    spec = REGISTRY[name]
    try:
        spec.head(spaces)
    except ValueError:
        return None
    doc: dict = {"algo": {"name": name}, "learner": {"device": device, "amp": amp}}
    if encoder is not None and spaces.obs.image:
        doc["algo"]["net"] = {"encoder": encoder}
    if spec.loop == "chunks":
        doc.update(sampling={"unit": "chunk"}, replay={"sampler": "fifo", "max_use": 1})
    cfg = RunConfig.model_validate(doc)
    return LearnerTask(task_id="learner-0", buffer_id="replay-0", algo=cfg.algo, env=cfg.env, spaces=spaces,
                       behaviour=spec.behaviour(cfg, spaces), learner=cfg.learner, replay=cfg.replay,
                       sampling=cfg.sampling, collector=cfg.collector, seed=0)


def random_column(rng: np.random.Generator, name: str, dtype: str, shape: tuple[int, ...], spaces: Spaces
                  ) -> np.ndarray:
    if name in ("terminated", "truncated"):
        return rng.random(shape) < 0.02
    if name == "valid":
        return np.ones(shape, bool)
    if name == "logp":
        return rng.uniform(-2.0, -0.1, shape).astype(np.float32)
    if name == "actions":
        if isinstance(spaces.action, DiscreteActions):
            return rng.integers(0, spaces.action.n, shape).astype(np.int64)
        return rng.uniform(-0.99, 0.99, shape).astype(np.float32)
    if dtype == "uint8":
        return rng.integers(0, 256, shape).astype(np.uint8)
    return rng.standard_normal(shape).astype(dtype)


def make_batch(task: LearnerTask, seed: int) -> object:
    rng = np.random.default_rng(seed)
    schema = chunk_schema(task.spaces, task.behaviour, task.env)
    if REGISTRY[task.algo.name].loop == "chunks":
        return [{name: random_column(rng, name, col.dtype, (CHUNK_STEPS, CHUNK_ENVS, *col.shape), task.spaces)
                 for name, col in schema.columns.items()} for _ in range(CHUNKS)]
    size = task.algo.batch_size  # type: ignore[attr-defined]
    obs, actions = schema.columns["obs"], schema.columns["actions"]
    return {"obs": random_column(rng, "obs", obs.dtype, (size, *obs.shape), task.spaces),
            "boot_obs": random_column(rng, "obs", obs.dtype, (size, *obs.shape), task.spaces),
            "actions": random_column(rng, "actions", actions.dtype, (size, *actions.shape), task.spaces),
            "returns": rng.standard_normal(size).astype(np.float32),
            "discount": np.full(size, 0.97, np.float32), "weights": np.ones(size, np.float32),
            "ids": np.arange(size)}


def updates_for(updates: int, label: str, device: str) -> int:
    """CNN updates on 84x84 images take seconds each on one CPU thread: time fewer of them there."""
    if label not in ("image-discrete", "frames"):
        return updates
    return max(2, updates // 50) if device == "cpu" else max(5, updates // 10)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(task: LearnerTask, updates: int) -> dict:
    from rlfleet.learner_worker.device import precision, resolve_device

    device = resolve_device(task.learner.device)
    learner = load_learner(task, device)
    batches = [make_batch(task, seed) for seed in range(4)]
    context = precision(task.learner.amp, device)  # type: ignore[arg-type]
    with context():
        first = learner.update(batches[0])
        for k in range(min(5, updates)):
            learner.update(batches[k % 4])
    sync(device)
    start = time.perf_counter()
    for k in range(updates):
        with context():
            learner.update(batches[k % 4])
    sync(device)
    seconds = time.perf_counter() - start
    policy = learner.policy_state()
    return {"device": str(device), "updates_per_second": updates / seconds, "first_losses": first,
            "policy_on_cpu_ok": all(v.detach().cpu().isfinite().all().item() for v in policy.values()),
            "state": learner.state()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--algos", nargs="+", choices=sorted(REGISTRY), default=sorted(REGISTRY))
    parser.add_argument("--spaces", nargs="+", choices=sorted(SPACES), default=list(SPACES))
    parser.add_argument("--encoder", type=json.loads, help="algo.net.encoder for image spaces, as JSON")
    parser.add_argument("--amp", choices=["none", "bf16"], default="none",
                        help="also time CUDA updates under this learner.amp")
    parser.add_argument("--threads", type=int, help="the CPU learner's torch threads (default: its cores)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads or torch_threads("auto"))  # as a learner service runs
    devices = ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]
    print(f"torch {torch.__version__}; devices: {devices}; {torch.get_num_threads()} CPU threads"
          + (f" ({torch.cuda.get_device_name(0)})" if "cuda" in devices else ""))
    rows, failures = [], []
    for name in args.algos:
        for label in args.spaces:
            spaces = SPACES[label]
            results = {}
            for device in devices:
                task = task_for(name, spaces, device, args.encoder)
                if task is None:
                    break
                results[device] = measure(task, updates_for(args.updates, label, device))
            if "cuda" in results and args.amp != "none":
                amp_task = task_for(name, spaces, "cuda", args.encoder, args.amp)
                assert amp_task is not None
                results[f"cuda_{args.amp}"] = measure(amp_task, updates_for(args.updates, label, "cuda"))
            if not results:
                continue
            row = {"algo": name, "spaces": label,
                   **{f"{d}_updates_per_s": round(r["updates_per_second"], 1) for d, r in results.items()}}
            if "cuda" in results:
                row["speedup"] = round(results["cuda"]["updates_per_second"] / results["cpu"]["updates_per_second"],
                                       2)
                cpu_l, gpu_l = results["cpu"]["first_losses"], results["cuda"]["first_losses"]
                worst = max(abs(cpu_l[k] - gpu_l[k]) / max(1e-3, abs(cpu_l[k])) for k in cpu_l)
                row["first_update_max_rel_diff"] = round(worst, 5)
                if worst > 1e-2 or not math.isfinite(worst):
                    failures.append(f"{name}/{label}: first-update losses differ by {worst:.3g}")
                if not results["cuda"]["policy_on_cpu_ok"]:
                    failures.append(f"{name}/{label}: policy state not readable on the CPU")
                cpu_task = task_for(name, spaces, "cpu", args.encoder)
                assert cpu_task is not None
                moved = {k: v for k, v in results["cuda"]["state"].items()}
                on_cpu = _to_cpu(moved)
                assert isinstance(on_cpu, dict)
                load_learner(cpu_task, torch.device("cpu")).load(on_cpu)
            amped = results.get(f"cuda_{args.amp}")
            if amped is not None:
                row[f"speedup_{args.amp}"] = round(amped["updates_per_second"] / results["cpu"]["updates_per_second"],
                                                   2)
                if not all(math.isfinite(v) for v in amped["first_losses"].values()):
                    failures.append(f"{name}/{label}: {args.amp} losses not finite: {amped['first_losses']}")
            rows.append(row)
            print(json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "failures": failures}, indent=2))
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


def _to_cpu(state: object) -> object:
    """What torch.load(map_location='cpu') does to a checkpoint written from a GPU learner."""
    if isinstance(state, torch.Tensor):
        return state.cpu()
    if isinstance(state, dict):
        return {k: _to_cpu(v) for k, v in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(_to_cpu(v) for v in state)
    return state


if __name__ == "__main__":
    sys.exit(main())
