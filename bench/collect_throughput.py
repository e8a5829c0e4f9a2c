"""Collection throughput through the whole stack vs the same rollout in one process, measured side by side.

  python bench/collect_throughput.py [--envs 8] [--seconds 10] [--repeats 3] [--object-store]

Stack: a uvicorn coordinator and one collector process; a step counts once the coordinator has
acknowledged its chunk (payload written atomically with fsync, metadata reported over HTTP).
Baseline: the collector's own Rollout (SyncVectorEnv + the same Q network, epsilon-greedy) in one process,
no I/O. Runs alternate baseline/stack `--repeats` times; the script prints medians and their ratio.
Replay warm-up is set beyond reach so the rate limiter never pauses the lone collector.
`--object-store` adds a third arm: the same stack with payloads in an S3-compatible store (SeaweedFS on
loopback, `weed` from the dev extra) instead of the run directory, and prints that ratio too (S3 / local).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

if TYPE_CHECKING:
    from tests.support.seaweed import SeaweedFS


def baseline_worker(envs: int, chunk_steps: int, seconds: float, warmup: float) -> None:
    import torch

    from rlfleet.collector_worker.rollout import Rollout
    from rlfleet.shared.config.plan import RunPlan
    from rlfleet.shared.config.run_config import RunConfig
    from rlfleet.shared.policy.manifest import PolicyManifest
    from rlfleet.shared.policy.nets import PolicyNet

    torch.set_num_threads(1)
    plan = RunPlan.of(RunConfig())
    rollout = Rollout(plan.config.env, envs, plan.spaces, plan.behaviour, seed=0)
    manifest = PolicyManifest.of(plan.spaces, plan.config.algo.net, plan.behaviour.head)
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


def run_stack(envs: int, chunk_steps: int, seconds: float, warmup: float, store_env: dict[str, str] | None = None
              ) -> float:
    """Acknowledged env steps/s of one collector; `store_env`: the store settings of an object store for the
    coordinator and the collector (which then writes nothing to the data directory), None for the run dir."""
    from rlfleet.shared.config.run_config import dump_run_config, load_run_config
    from rlfleet.shared.tokens import generate_tokens_file
    from tests.support.fleet import Fleet

    with tempfile.TemporaryDirectory() as tmp_str:
        tmp = Path(tmp_str)
        data = tmp / "data"
        tokens = generate_tokens_file(data / "tokens.json")
        cfg = load_run_config(REPO / "configs/cartpole_dqn.yaml", {
            "name": "bench", "collector.num_envs": envs, "collector.chunk_steps": chunk_steps,
            "replay.min_transitions": 10**12, "budget.max_env_steps": 10**12})
        config_file = tmp / "bench.yaml"
        config_file.write_text(dump_run_config(cfg))
        fleet = Fleet(tmp, data, config_file, tokens, store_env)
        try:
            fleet.start_coordinator()
            if store_env is None:
                fleet.start_worker("collector", "collector")
            else:
                fleet.start("collector", "collector", {
                    "RLFLEET_COORDINATOR_URL": fleet.url, "RLFLEET_DATA_DIR": str(tmp / "collector-host"),
                    "RLFLEET_TOKEN": tokens["collector"], **store_env})
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
    parser.add_argument("--object-store", action="store_true",
                        help="also run the stack with payloads in SeaweedFS on loopback (S3 API)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--baseline-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline_worker:
        baseline_worker(args.envs, args.chunk_steps, args.seconds, args.warmup)
        return
    with contextlib.ExitStack() as stack_of_servers:
        seaweed = stack_of_servers.enter_context(seaweedfs()) if args.object_store else None
        base, stack, s3 = [], [], []
        for i in range(args.repeats):
            base.append(run_baseline(args.envs, args.chunk_steps, args.seconds, args.warmup))
            stack.append(run_stack(args.envs, args.chunk_steps, args.seconds, args.warmup))
            line = (f"repeat {i + 1}: baseline {base[-1]:,.0f} steps/s, stack {stack[-1]:,.0f} steps/s "
                    f"(ratio {stack[-1] / base[-1]:.3f})")
            if seaweed is not None:
                store_env = {"RLFLEET_STORE_URL": f"s3://{seaweed.bucket()}/bench", **seaweed.env}
                s3.append(run_stack(args.envs, args.chunk_steps, args.seconds, args.warmup, store_env))
                line += f", stack with S3 {s3[-1]:,.0f} steps/s (S3 / local {s3[-1] / stack[-1]:.3f})"
            print(line, flush=True)
    mb, ms = statistics.median(base), statistics.median(stack)
    chunk = args.envs * args.chunk_steps
    print(f"\n{args.envs} envs, chunks of {chunk} transitions, {args.seconds:g}s windows, {args.repeats} repeats")
    print(f"in-process baseline (median): {mb:,.0f} env steps/s")
    print(f"whole stack (median):         {ms:,.0f} env steps/s")
    print(f"ratio stack / baseline:       {ms / mb:.3f}")
    result = {"envs": args.envs, "chunk_transitions": chunk, "baseline": base, "stack": stack, "ratio": ms / mb}
    if s3:
        m3 = statistics.median(s3)
        # Each S3 run follows its local run within seconds: on a shared machine their ratio is less exposed to
        # other load than a ratio of medians taken minutes apart.
        paired = statistics.median(x / y for x, y in zip(s3, stack, strict=True))
        print(f"stack, payloads in S3 (median): {m3:,.0f} env steps/s")
        print(f"ratio S3 / local directory:     {m3 / ms:.3f} (median of the paired ratios: {paired:.3f})")
        result.update(stack_s3=s3, ratio_s3_local=m3 / ms, paired_ratio_s3_local=paired)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


@contextlib.contextmanager
def seaweedfs() -> Iterator[SeaweedFS]:
    """SeaweedFS on loopback for the object-store arm, stopped (and its files removed) at the end."""
    from tests.support.seaweed import SeaweedFS

    with tempfile.TemporaryDirectory() as tmp:
        server = SeaweedFS(Path(tmp))
        server.start()
        try:
            yield server
        finally:
            server.stop()


if __name__ == "__main__":
    main()
