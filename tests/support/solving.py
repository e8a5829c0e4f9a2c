"""Training a config to solved with `rlfleet up` in a real process, as the end-to-end tests of algorithms do."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.repo import REPO


def up_until_solved(data_dir: Path, config: str, threshold: float, *args: str) -> dict:
    """`rlfleet up` with `config` until the run is solved and confirmed on 100 held-out episodes at `threshold`:
    the summary it leaves."""
    done = subprocess.run(
        [sys.executable, "-m", "rlfleet.launcher", "up", "--config", config, "--data-dir", str(data_dir), "--port", "0",
         *args],
        cwd=REPO, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "run solved" in done.stdout
    (run_dir,) = (data_dir / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_state"] == "solved"
    assert summary["best_evaluation"]["mean"] >= threshold
    test = summary["confirmed_by"]  # confirmed on 100 held-out episodes, not by a lucky validation
    assert test["confirmed"] and test["episodes"] == 100 and test["mean"] >= threshold
    print(f"solved: {summary['env_steps']} env steps, {summary['wall_seconds']:.1f}s")
    return summary
