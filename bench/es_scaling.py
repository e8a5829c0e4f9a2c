"""Evolution strategies on CartPole-v1: the solve on several seeds, and time per generation with 1, 2 and 4
collectors.

    python bench/es_scaling.py [--seeds 0 1 2] [--collectors 1 2 4] [--json out.json]

Every run is `rlfleet up --config configs/cartpole_es.yaml`. The solve table uses the config as it is (2
collectors) and prints generations, env steps and wall time to the confirmed solve. The scaling runs set
`algo.min_fraction=1.0`: every member reports, and members are evaluated greedily on their generation's seeds, so
a generation's work and its update are the same whichever collector evaluates which member; runs with 1, 2 and 4
collectors then walk the same generations and differ only in how many processes evaluate them. Time per
generation is the median of the learner's `generation_seconds` (open to results), sampled once per metrics
interval, and the mean over the generations all collector counts reached; runs are interleaved per seed.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIG = "configs/cartpole_es.yaml"


def run(seed: int, collectors: int | None, *overrides: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="rlfleet-es-") as data:
        args = [sys.executable, "-m", "rlfleet.launcher", "up", "--config", CONFIG, "--data-dir", data, "--port", "0",
                "--seed", str(seed)]
        args += ["--collectors", str(collectors)] if collectors else []
        for override in overrides:
            args += ["--set", override]
        done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=1800)
        if done.returncode not in (0, 1):
            raise RuntimeError(f"rlfleet up failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        (run_dir,) = (Path(data) / "runs").iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
        with (run_dir / "losses.csv").open() as f:
            rows = [r for r in csv.DictReader(f) if r["loss"] in ("generation", "generation_seconds")]
    by_wall: dict[str, dict[str, float]] = {}
    for r in rows:
        by_wall.setdefault(r["wall_seconds"], {})[r["loss"]] = float(r["value"])
    samples = [(float(w), v["generation"], v["generation_seconds"]) for w, v in by_wall.items() if len(v) == 2]
    losses = summary["learner"]["losses"]
    return {"seed": seed, "collectors": collectors, "solved": summary["run_state"] == "solved",
            "generations": int(losses.get("generation", 0)), "env_steps": summary["env_steps"],
            "wall_seconds": round(summary["wall_seconds"], 2),
            "test_mean": (summary.get("confirmed_by") or {}).get("mean"), "samples": samples}


def mean_seconds_per_generation(samples: list[tuple[float, float, float]], last: float) -> float | None:
    """(wall at the last sample up to generation `last` - wall at the first) / generations between them."""
    kept = [s for s in samples if s[1] <= last]
    if len(kept) < 2 or kept[-1][1] == kept[0][1]:
        return None
    return (kept[-1][0] - kept[0][0]) / (kept[-1][1] - kept[0][1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--collectors", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    solves = []
    for seed in args.seeds:
        r = run(seed, None)
        solves.append(r)
        print(f"seed {seed}: " + (f"solved after {r['generations']} generations, {r['env_steps']:,} env steps, "
                                  f"{r['wall_seconds']:.1f}s (test {r['test_mean']:.1f})" if r["solved"] else
                                  f"NOT solved ({r['generations']} generations, {r['env_steps']:,} env steps)"),
              flush=True)

    scaling = []
    for seed in args.seeds:
        for k in args.collectors:
            r = run(seed, k, "algo.min_fraction=1.0")
            scaling.append(r)
            median = statistics.median(s[2] for s in r["samples"]) if r["samples"] else float("nan")
            print(f"seed {seed}, {k} collector(s): {r['generations']} generations, median generation "
                  f"{median:.3f}s, solved={r['solved']}", flush=True)

    print(f"\n{'collectors':>10} {'median s/generation':>20} {'mean s/generation':>18} {'vs 1':>6}")
    base = None
    for k in args.collectors:
        mine = [r for r in scaling if r["collectors"] == k]
        medians, means = [], []
        for r in mine:
            common = min(x["generations"] for x in scaling if x["seed"] == r["seed"])
            medians.append(statistics.median(s[2] for s in r["samples"] if s[1] <= common))
            mean = mean_seconds_per_generation(r["samples"], common)
            if mean is not None:
                means.append(mean)
        median = statistics.median(medians)
        base = base or median
        mean_text = f"{statistics.median(means):.3f}" if means else "-"
        print(f"{k:>10} {median:>20.3f} {mean_text:>18} {median / base:>6.2f}")
    if args.json:
        args.json.write_text(json.dumps({"solves": solves, "scaling": scaling}, indent=1))


if __name__ == "__main__":
    main()
