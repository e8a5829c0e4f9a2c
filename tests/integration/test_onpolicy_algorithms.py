"""`rlfleet up` solves CartPole-v1 with the on-policy algorithms beside PPO: A2C in lockstep, IMPALA with
asynchronous collectors whose stale data V-trace corrects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.repo import REPO


def _solved(data_dir: Path, config: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "rlfleet.launcher", "up", "--config", config, "--data-dir", str(data_dir),
         "--port", "0"],
        cwd=REPO, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "run solved" in done.stdout
    (run_dir,) = (data_dir / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_state"] == "solved"
    assert summary["best_evaluation"]["mean"] >= 475
    assert summary["learner"]["iteration"] > 0
    print(f"solved: {summary['env_steps']} env steps, {summary['wall_seconds']:.1f}s")
    return summary


@pytest.mark.slow
def test_a2c_solves_cartpole_in_lockstep(tmp_path: Path) -> None:
    summary = _solved(tmp_path, "configs/cartpole_a2c.yaml")
    assert summary["policy_lag"]["sampled_max"] == 0  # force_sync: every chunk from the policy being trained
    assert summary["buffers"][0]["removed_max_use"] > 0


@pytest.mark.slow
def test_impala_solves_cartpole_on_stale_data(tmp_path: Path) -> None:
    """Collectors never wait for the learner: the data it consumed was up to max_policy_lag (4) versions old,
    and some of it was old (lag >= 1), which V-trace corrected."""
    summary = _solved(tmp_path, "configs/cartpole_impala.yaml")
    lag = summary["policy_lag"]
    assert 1 <= lag["sampled_max"] <= 4, lag
    assert lag["sampled_mean"] > 0, lag
