"""Population-based training against the same population with its settings held, at the same total env steps.

  python bench/pbt_vs_fixed.py [--spec configs/pbt/lunarlander_ppo.yaml] [--out bench/results/pbt] [--json out.json]

Runs `rlfleet pbt SPEC` (exploit and explore every interval) and then `rlfleet pbt SPEC --fixed` (the same members,
seeds and initial settings, no copies): both train K members to the spec's `budget.max_env_steps` each, so both
spend the same total env steps unless a member solves early (the totals are printed). Each side's best member (by
validation) is tested on held-out episodes the run never used; the script prints both tests and the lineage plot's
path, whichever way it comes out. One side after the other, never both at once: they would share the cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def side(spec: Path, out: Path, fixed: bool) -> dict[str, object]:
    """One population run to its end: its held-out test, total env steps, copies and wall time."""
    started = time.monotonic()
    args = [sys.executable, "-m", "rlfleet.launcher", "pbt", str(spec), "--output-dir", str(out)]
    done = subprocess.run([*args, "--fixed"] if fixed else args, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"rlfleet pbt{' --fixed' if fixed else ''} exited {done.returncode}: see {out}")
    rows = [json.loads(line) for line in (out / "lineage.jsonl").read_text().splitlines()]
    test_file = out / "best_test.json"
    test = json.loads(test_file.read_text()) if test_file.exists() else None
    total = _total_env_steps(out)
    return {"mode": "fixed" if fixed else "pbt", "wall_seconds": round(time.monotonic() - started, 1),
            "total_env_steps": total, "copies": sum(r["event"] == "exploit" for r in rows),
            "best_member": None if test is None else test["member"],
            "test_mean": None if test is None else test["mean"], "test_ci95": None if test is None else test["ci95"],
            "test_episodes": None if test is None else test["episodes"], "plot": str(out / "lineage.png")}


def _total_env_steps(out: Path) -> int:
    """Every member's env steps at its end, from the report's member table."""
    total = 0
    for line in (out / "pbt_report.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 5 and cells[1].startswith("member-"):
            total += int(cells[4])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=Path, default=REPO / "configs" / "pbt" / "lunarlander_ppo.yaml")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "pbt")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results = [side(args.spec, args.out / "pbt", fixed=False), side(args.spec, args.out / "fixed", fixed=True)]
    print(f"{'side':6} {'total env steps':>16} {'copies':>7} {'best':>9} {'held-out test':>14} {'95% CI':>18} "
          f"{'wall s':>8}")
    for r in results:
        ci = r["test_ci95"]
        interval = "-" if not isinstance(ci, list) else f"[{ci[0]:.1f}, {ci[1]:.1f}]"
        mean = r["test_mean"]
        print(f"{r['mode']:6} {r['total_env_steps']:>16} {r['copies']:>7} {r['best_member'] or '-':>9} "
              f"{'-' if not isinstance(mean, float) else f'{mean:.2f}':>14} {interval:>18} {r['wall_seconds']:>8}")
    print(f"lineage plots: {results[0]['plot']}, {results[1]['plot']}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
