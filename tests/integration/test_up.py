"""`rlfleet up`: docker-compose.yml's services, commands and environments run as local processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.repo import REPO


def _up(data_dir: Path, *args: str, timeout: float,
        config: str = "configs/cartpole_dqn.yaml") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlfleet.launcher", "up", "--config", config, "--data-dir", str(data_dir), "--port", "0",
         *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )


def _run_dir(data_dir: Path) -> Path:
    (run_dir,) = (data_dir / "runs").iterdir()
    return run_dir


@pytest.mark.slow
def test_compose_wiring_runs_every_service_locally(tmp_path: Path) -> None:
    """A short budget: every compose service starts, registers and works; the run ends budget_exhausted."""
    # Small chunks: the rate limiter pauses collectors near min + tolerance (~5k steps) with little overshoot,
    # so the learner must train and publish before the 8k budget runs out. A threshold above CartPole's best
    # return (500): a lucky early policy must not end the run as solved before the budget does.
    done = _up(tmp_path, "--set", "budget.max_env_steps=8000", "--set", "collector.chunk_steps=16",
               "--set", "env.solve_threshold=1000", timeout=240)
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
def test_a_run_out_of_budget_resumed_with_a_larger_one_trains_on(tmp_path: Path) -> None:
    """The Pong run on a lent GPU ran out of its budget while still climbing, and its resume kept that budget. Now
    `rlfleet up --resume NAME --set budget.max_env_steps=...` (no --config: the run's own) trains the same run on
    to the new budget, from its checkpoint, with its data; anything else set on a resume is refused."""
    common = ("--collectors", "1", "--set", "env.solve_threshold=1000")  # unreachable: the budget ends it
    first = _up(tmp_path, *common, "--set", "budget.max_env_steps=1024", timeout=240,
                config="configs/cartpole_ppo.yaml")
    assert first.returncode == 1 and "run budget_exhausted" in first.stdout, first.stdout + first.stderr
    run_dir = _run_dir(tmp_path)
    before = json.loads((run_dir / "summary.json").read_text())
    resume = [sys.executable, "-m", "rlfleet.launcher", "up", "--resume", str(run_dir), "--port", "0",
              "--collectors", "1"]
    refused = subprocess.run([*resume, "--set", "algo.learning_rate=0.1"], cwd=REPO, capture_output=True,
                             text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert refused.returncode == 2 and "only budget.* may change on --resume" in " ".join(refused.stderr.split())
    again = subprocess.run([*resume, "--set", "budget.max_env_steps=3072"], cwd=REPO, capture_output=True,
                           text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert again.returncode == 1 and "run budget_exhausted" in again.stdout, again.stdout + again.stderr
    after = json.loads((run_dir / "summary.json").read_text())
    assert (after["run_name"], after["coordinator_resumes"]) == (before["run_name"], 1)
    assert before["env_steps"] < 3072 <= after["env_steps"]
    assert after["learner"]["iteration"] > before["learner"]["iteration"]
    assert "env-step budget of 3072 used up" in after["run_message"]


def _solved(data_dir: Path, *args: str, config: str = "configs/cartpole_dqn.yaml") -> dict:
    done = _up(data_dir, *args, config=config, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "run solved" in done.stdout
    summary = json.loads((_run_dir(data_dir) / "summary.json").read_text())
    assert summary["run_state"] == "solved"
    assert summary["best_evaluation"]["mean"] >= 475
    test = summary["confirmed_by"]  # confirmed on 100 held-out episodes, not by a lucky validation
    assert test["confirmed"] and test["episodes"] == 100 and test["mean"] >= 475
    assert test["rule"] == "retest_lower_bound_95" and test["bound"] >= 475
    score = json.loads((_run_dir(data_dir) / "best" / "score.json").read_text())
    assert score["test"]["policy_version"] == score["validation"]["policy_version"] == test["policy_version"]
    assert score["test"]["mean"] == pytest.approx(test["mean"]) and score["test"]["episodes"] == 100
    print(f"solved: {summary['env_steps']} env steps, {summary['wall_seconds']:.1f}s, "
          f"{summary['tests_rejected']} validation passes rejected")
    return summary


@pytest.mark.slow
@pytest.mark.parametrize("sync", ["force_sync", "max_policy_lag=2"])
def test_ppo_solves_cartpole_through_the_stack(tmp_path: Path, sync: str) -> None:
    """PPO with 2 collectors: lockstep (every chunk from the newest policy) or at most 2 versions stale."""
    args = () if sync == "force_sync" else ("--set", "sampling.force_sync=false", "--set",
                                            "sampling.max_policy_lag=2")
    summary = _solved(tmp_path, *args, config="configs/cartpole_ppo.yaml")
    lag, (buffer,) = summary["policy_lag"], summary["buffers"]
    assert lag["sampled_max"] <= (0 if sync == "force_sync" else 2)
    assert buffer["sampler"] == "fifo" and buffer["removed_max_use"] > 0
    assert summary["learner"]["iteration"] > 0


@pytest.mark.slow
def test_dqn_with_prioritized_replay_solves_cartpole(tmp_path: Path) -> None:
    summary = _solved(tmp_path, config="configs/cartpole_dqn_per.yaml")
    (buffer,) = summary["buffers"]
    assert buffer["sampler"] == "prioritized"
    assert buffer["max_priority"] > 1.0  # the learner's TD errors came back as priorities
    assert 0.4 < buffer["beta"] <= 1.0


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
    for artifact in ("config.yaml", "metrics.csv", "losses.csv", "evaluations.csv", "tests.csv", "learning_curve.png",
                     "best/policy.safetensors", "best/score.json"):
        assert (run_dir / artifact).exists(), artifact
    assert any((run_dir / "tb").iterdir())
    assert any((run_dir / "checkpoints").glob("learner-*.pt"))
    print(f"solved: {summary['env_steps']} env steps, {summary['wall_seconds']:.1f}s")
