"""Behavioural cloning from a recording of a solved CartPole run: the expert, the recording, BC on 3 seeds.

    python bench/bc_from_recording.py [--expert-config configs/cartpole_es.yaml] [--episodes 20] [--seeds 0 1 2]

1. `rlfleet up` trains the expert until its solve is confirmed by 100 held-out episodes (ES: the fastest here).
2. `rlfleet record` plays its best policy greedily for --episodes episodes into the dataset `cartpole-expert`
   (20% of the episodes in the valid split).
3. `rlfleet up --config configs/cartpole_bc.yaml` trains BC on it once per seed; each run ends when a
   validation reaches 475 and 100 held-out episodes confirm it, or after its epochs. Each solved BC policy is
   then re-tested with `rlfleet test` on 100 more episodes of a seed block the run never used.
Printed per seed: the confirming test, the re-test, and the valid split's loss and accuracy after each epoch.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def rlfleet(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "rlfleet.launcher", *args], cwd=REPO, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=1800)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"rlfleet {args[0]} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done


def up(data: Path, config: str, seed: int, *more: str) -> tuple[Path, dict]:
    before = set((data / "runs").iterdir()) if (data / "runs").exists() else set()
    started = time.monotonic()
    rlfleet("up", "--config", config, "--data-dir", str(data), "--port", "0", "--seed", str(seed), *more)
    (run_dir,) = set((data / "runs").iterdir()) - before
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["launch_seconds"] = time.monotonic() - started
    return run_dir, summary


def epochs(summary: dict) -> list[tuple[int, float, float]]:
    """(epoch, valid loss, valid accuracy) after each epoch, as the run's status keeps them."""
    return [(e["epoch"], e["scores"]["valid_nll"], e["scores"]["valid_accuracy"])
            for e in summary["dataset"]["epoch_scores"]]


def record_expert(data: Path, config: str, episodes: int) -> Path:
    """Steps 1 and 2: train the expert to a confirmed solve, record `episodes` of it as `cartpole-expert`."""
    expert_dir, expert = up(data, config, 0)
    if expert["run_state"] != "solved":
        raise SystemExit(f"the expert run did not solve: {expert['run_message']}")
    print(f"expert: {expert_dir.name} solved, test {expert['confirmed_by']['mean']:.1f} over 100 episodes")
    recorded = rlfleet("record", str(expert_dir), "--name", "cartpole-expert", "--episodes", str(episodes),
                       "--data-dir", str(data))
    print(recorded.stdout.strip().splitlines()[-1])
    return expert_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expert-config", default="configs/cartpole_es.yaml")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rlfleet-bc-") as tmp:
        data = Path(tmp)
        expert_dir = record_expert(data, args.expert_config, args.episodes)
        results = []
        for seed in args.seeds:
            run_dir, summary = up(data, "configs/cartpole_bc.yaml", seed)
            test = summary.get("confirmed_by") or {}
            retest = None
            if summary["run_state"] == "solved":
                rlfleet("test", str(run_dir), "--seed-counter", "1")
                retest = json.loads((run_dir / "test.json").read_text())["mean"]
            curve = epochs(summary)
            results.append({"seed": seed, "state": summary["run_state"], "test_mean": test.get("mean"),
                            "retest_mean": retest, "epochs": curve, "seconds": round(summary["launch_seconds"], 1)})
            print(f"BC seed {seed}: {summary['run_state']}, held-out test {test.get('mean')}, re-test {retest}, "
                  f"{summary['launch_seconds']:.1f}s from launch")
            for epoch, loss, accuracy in curve:
                print(f"    epoch {epoch}: valid loss {loss:.4f}, valid accuracy {accuracy:.4f}")
        if args.json:
            args.json.write_text(json.dumps({"expert": expert_dir.name, "bc": results}, indent=1))


if __name__ == "__main__":
    main()
