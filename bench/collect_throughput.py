"""Collection throughput through the whole stack vs the same rollout in one process, measured side by side.

  python bench/collect_throughput.py [--envs 8] [--seconds 10] [--repeats 3]

Stack: a uvicorn coordinator and one collector process; a step counts once the coordinator has
acknowledged its chunk (payload written atomically with fsync, metadata reported over HTTP).
Baseline: the collector's own Rollout (SyncVectorEnv + the same Q network, epsilon-greedy) in one process,
no I/O. Runs alternate baseline/stack `--repeats` times; the script prints medians and their ratio.
Replay warm-up is set beyond reach so the rate limiter never pauses the lone collector.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def baseline_worker(envs: int, chunk_steps: int, seconds: float, warmup: float) -> None:
    import torch

    from collector_worker.rollout import Rollout
    from shared.config import RunConfig
    from shared.manifest import PolicyManifest
    from shared.nets import PolicyNet
    from shared.plan import RunPlan

    torch.set_num_threads(1)
    plan = RunPlan.of(RunConfig())
    rollout = Rollout(plan.config.env, envs, plan.spaces, plan.behaviour, seed=0)
    manifest = PolicyManifest(spaces=plan.spaces, net=plan.config.algo.net, head=plan.behaviour.head)
    rollout.load_policy(manifest, {k: v.numpy() for k, v in PolicyNet(manifest).state_dict().items()})
    end_warm = time.perf_counter() + warmup
    while time.perf_counter() < end_warm:
        rollout.collect(chunk_steps, 0.1)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += rollout.collect(chunk_steps, 0.1).env_steps
    print(json.dumps({"steps_per_second": steps / (time.perf_counter() - start)}))


SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run_baseline(envs: int, chunk_steps: int, seconds: float, warmup: float) -> float:
    out = subprocess.run([sys.executable, __file__, "--baseline-worker", "--envs", str(envs), "--chunk-steps",
                          str(chunk_steps), "--seconds", str(seconds), "--warmup", str(warmup)],
                         capture_output=True, text=True, check=True, cwd=REPO,
                         env={**os.environ, **SINGLE_THREADED})  # as every rlfleet service runs (launcher/)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["steps_per_second"])


def run_stack(envs: int, chunk_steps: int, seconds: float, warmup: float) -> float:
    from shared.config import dump_run_config, load_run_config
    from shared.tokens import generate_tokens_file
    from tests.integration.procs import Fleet

    with tempfile.TemporaryDirectory() as tmp_str:
        tmp = Path(tmp_str)
        data = tmp / "data"
        tokens = generate_tokens_file(data / "tokens.json")
        cfg = load_run_config(REPO / "configs/cartpole_dqn.yaml", {
            "name": "bench", "collector.num_envs": envs, "collector.chunk_steps": chunk_steps,
            "replay.min_transitions": 10**12, "budget.max_env_steps": 10**12})
        config_file = tmp / "bench.yaml"
        config_file.write_text(dump_run_config(cfg))
        fleet = Fleet(tmp, data, config_file, tokens)
        try:
            fleet.start_coordinator()
            fleet.start_worker("collector", "collector")
            fleet.wait_for(lambda: fleet.status().chunks > 0, 60, "first chunk")
            time.sleep(warmup)
            s0, t0 = fleet.status().env_steps, time.perf_counter()
            time.sleep(seconds)
            s1, t1 = fleet.status().env_steps, time.perf_counter()
            return (s1 - s0) / (t1 - t0)
        finally:
            fleet.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--chunk-steps", type=int, default=256, help="vector steps per chunk (config default)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--baseline-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline_worker:
        baseline_worker(args.envs, args.chunk_steps, args.seconds, args.warmup)
        return
    base, stack = [], []
    for i in range(args.repeats):
        base.append(run_baseline(args.envs, args.chunk_steps, args.seconds, args.warmup))
        stack.append(run_stack(args.envs, args.chunk_steps, args.seconds, args.warmup))
        print(f"repeat {i + 1}: baseline {base[-1]:,.0f} steps/s, stack {stack[-1]:,.0f} steps/s "
              f"(ratio {stack[-1] / base[-1]:.3f})", flush=True)
    mb, ms = statistics.median(base), statistics.median(stack)
    chunk = args.envs * args.chunk_steps
    print(f"\n{args.envs} envs, chunks of {chunk} transitions, {args.seconds:g}s windows, {args.repeats} repeats")
    print(f"in-process baseline (median): {mb:,.0f} env steps/s")
    print(f"whole stack (median):         {ms:,.0f} env steps/s")
    print(f"ratio stack / baseline:       {ms / mb:.3f}")
    if args.json:
        args.json.write_text(json.dumps({"envs": args.envs, "chunk_transitions": chunk, "baseline": base,
                                         "stack": stack, "ratio": ms / mb}, indent=2))


if __name__ == "__main__":
    main()
