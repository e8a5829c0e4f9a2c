"""`rlfleet up`: docker-compose.yml's services, commands and environments run as local processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def _up(data_dir: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "launcher", "up", "--config", "configs/cartpole_dqn.yaml", "--data-dir",
         str(data_dir), "--port", "0", *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )


def _run_dir(data_dir: Path) -> Path:
    (run_dir,) = (data_dir / "runs").iterdir()
    return run_dir


def test_compose_wiring_runs_every_service_locally(tmp_path: Path) -> None:
    """A short budget: every compose service starts, registers and works; the run ends budget_exhausted."""
    # Small chunks: the rate limiter pauses collectors near min + tolerance (~5k steps) with little overshoot,
    # so the learner must train and publish before the 8k budget runs out.
    done = _up(tmp_path, "--set", "budget.max_env_steps=8000", "--set", "collector.chunk_steps=16", timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "run budget_exhausted" in done.stdout
    run_dir = _run_dir(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] >= 8000
    assert summary["policy_version"] >= 1
    assert sorted(t["task_id"] for t in summary["tasks"]) == ["collector-0", "collector-1", "evaluator-0",
                                                              "learner-0"]
    assert {p.name for p in (run_dir / "logs").iterdir()} == {
        "secrets.log", "coordinator.log", "collector-1.log", "collector-2.log", "learner.log", "evaluator.log"}
    assert (tmp_path / "tokens.json").stat().st_mode & 0o777 == 0o600


@pytest.mark.slow
def test_default_run_solves_cartpole(tmp_path: Path) -> None:
    """README's train command, end to end: DQN with 2 collectors reaches a greedy mean of 475 or more."""
    done = _up(tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "run solved" in done.stdout
    run_dir = _run_dir(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_state"] == "solved"
    # An evaluation of a newer version may land after the deciding one; the best is the deciding one or better.
    assert summary["best_evaluation"]["mean"] >= 475
    assert summary["best_evaluation"]["episodes"] == 10
    for artifact in ("config.yaml", "metrics.csv", "evaluations.csv", "learning_curve.png",
                     "best/policy.safetensors", "best/score.json"):
        assert (run_dir / artifact).exists(), artifact
    assert any((run_dir / "tb").iterdir())
    assert any((run_dir / "checkpoints").glob("learner-*.pt"))
    print(f"solved: {summary['env_steps']} env steps, {summary['wall_seconds']:.1f}s")
