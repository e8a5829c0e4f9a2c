"""Plain DQN vs DQN with Pohlen's value transform, on CartPole-v1 with training rewards x1 and x100.

    python bench/value_transform.py [--seeds 0 1 2] [--max-env-steps 100000] [--json out.json]

Every run is `rlfleet up --config configs/cartpole_dqn_pohlen.yaml` (the default DQN hyperparameters) with
`algo.value.transform` and the `scale_reward` wrapper set per variant, so the four variants differ in nothing
else. Runs are interleaved per seed (x1 plain, x1 pohlen, x100 plain, x100 pohlen) so machine noise hits all
alike. A run counts as solved when a validation reached 475 (raw env returns: reward scaling is for training
only) and 100 held-out test episodes confirmed it; a run that exhausts --max-env-steps is "not solved" and
ranks after every solved one in the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIG = "configs/cartpole_dqn_pohlen.yaml"
VARIANTS = [("x1", "none"), ("x1", "pohlen"), ("x100", "none"), ("x100", "pohlen")]


def run(scale: str, transform: str, seed: int, max_env_steps: int) -> dict:
    wrappers = "[]" if scale == "x1" else "[{name: scale_reward, scale: 100}]"
    with tempfile.TemporaryDirectory(prefix="rlfleet-vt-") as data:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "rlfleet.launcher", "up", "--config", CONFIG, "--data-dir", data, "--port", "0",
             "--seed", str(seed), "--set", f"algo.value.transform={transform}", "--set", f"env.wrappers={wrappers}",
             "--set", f"budget.max_env_steps={max_env_steps}"],
            cwd=REPO, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=1800)
        seconds = time.monotonic() - started
        (run_dir,) = (Path(data) / "runs").iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
    solved = summary["run_state"] == "solved"
    if done.returncode not in (0, 1):
        raise RuntimeError(f"rlfleet up failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    best = summary.get("best_evaluation") or {}
    return {"scale": scale, "transform": transform, "seed": seed, "solved": solved,
            "env_steps": summary["env_steps"], "seconds": round(seconds, 1), "best_validation": best.get("mean"),
            "test_mean": (summary.get("confirmed_by") or {}).get("mean")}


def _median(values: list[float | None]) -> str:
    """Median with unsolved runs (None) ranked after every solved one."""
    ranked = sorted(values, key=lambda v: (v is None, v or 0.0))
    mid = ranked[len(ranked) // 2] if len(ranked) % 2 else None
    if len(ranked) % 2 == 0:
        a, b = ranked[len(ranked) // 2 - 1], ranked[len(ranked) // 2]
        mid = None if a is None or b is None else statistics.mean([a, b])
    return "not solved" if mid is None else f"{mid:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-env-steps", type=int, default=100_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    for seed in args.seeds:
        for scale, transform in VARIANTS:
            r = run(scale, transform, seed, args.max_env_steps)
            results.append(r)
            print(f"seed {seed} rewards {scale:>4} {transform:>6}: "
                  + (f"solved at {r['env_steps']:,} env steps, {r['seconds']:.1f}s (test {r['test_mean']:.1f})"
                     if r["solved"] else f"not solved within {r['env_steps']:,} env steps "
                                         f"(best validation {r['best_validation']})"), flush=True)
    print(f"\n{'rewards':>8} {'value':>7} {'solved':>7} {'median env steps':>17} {'median seconds':>15}")
    for scale, transform in VARIANTS:
        mine = [r for r in results if (r["scale"], r["transform"]) == (scale, transform)]
        steps = [r["env_steps"] if r["solved"] else None for r in mine]
        secs = [r["seconds"] if r["solved"] else None for r in mine]
        print(f"{scale:>8} {transform:>7} {sum(r['solved'] for r in mine)}/{len(mine):<5} {_median(steps):>17} "
              f"{_median(secs):>15}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
