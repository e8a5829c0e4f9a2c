"""A run with no threshold through `rlfleet up`: PPO on a MuJoCo env (InvertedPendulum-v5) with
`env.solve_threshold: null` trains to its env-step budget, keeps the best validated and the last policy, tests
the best on held-out episodes before it ends, and exits 0; `rlfleet test` and `rlfleet runs` say "no threshold"
where a run with one would give a verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.repo import REPO

pytest.importorskip("mujoco", reason="MuJoCo is not installed (pip install -e '.[mujoco]'): InvertedPendulum-v5 "
                                     "cannot be built")

BUDGET = 6144  # three PPO iterations of 2 collectors x 2 envs x 512 steps
TEST_EPISODES = 20

CONFIG = {
    "name": "pendulum-budget",
    "env": {"id": "InvertedPendulum-v5", "max_episode_steps": 200, "solve_threshold": None},
    "collector": {"num_envs": 2, "chunk_steps": 512},
    "replay": {"sampler": "fifo", "capacity_transitions": 8192, "min_transitions": 1, "max_use": 1,
               "tolerance_transitions": 2048},
    "sampling": {"unit": "chunk", "min_batch_size": 1024, "max_batch_size": 2048, "max_wait_seconds": 5.0,
                 "force_sync": True},
    "algo": {"name": "ppo", "net": {"hidden": [32, 32], "activation": "tanh"}, "learning_rate": 0.001,
             "epochs": 4, "minibatch_size": 128},
    "evaluation": {"episodes": 5, "num_envs": 5, "test_episodes": TEST_EPISODES, "test_num_envs": 10},
    "budget": {"max_env_steps": BUDGET, "max_wall_seconds": 600},
}


def _rlfleet(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rlfleet.launcher", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_a_run_with_no_threshold_trains_to_its_budget_keeps_best_and_last_tests_the_best_and_exits_0(
        tmp_path: Path) -> None:
    config = tmp_path / "pendulum_budget.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    data_dir = tmp_path / "data"
    done = _rlfleet("up", "--config", str(config), "--data-dir", str(data_dir), "--port", "0", timeout=300)
    out = done.stdout[-4000:] + done.stderr[-4000:]
    assert done.returncode == 0, out
    assert "env.solve_threshold: none (set in the config)" in done.stdout, out
    (run_dir,) = (data_dir / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["run_state"], summary["no_threshold"]) == ("budget_exhausted", True), out
    assert summary["env_steps"] >= BUDGET and summary["tests_rejected"] == 0 and summary["confirmed_by"] is None
    best, last, test = summary["best_evaluation"], summary["policy_version"], summary["latest_test"]
    assert test["policy_version"] == best["policy_version"] and test["episodes"] == TEST_EPISODES
    assert f"best policy v{best['policy_version']} (validation {best['mean']:.1f}; held-out test" in \
        summary["run_message"]
    assert f"last policy v{last} in policies/v{last:08d}.safetensors" in summary["run_message"]
    # both kept: the best in best/ (its score names it), the last in the policy store
    score = json.loads((run_dir / "best" / "score.json").read_text())
    assert score["validation"]["policy_version"] == best["policy_version"]
    assert (run_dir / "best" / "policy.safetensors").is_file()
    assert (run_dir / "store" / "policies" / f"v{last:08d}.safetensors").is_file()
    print(f"no threshold: {summary['env_steps']} env steps in {summary['wall_seconds']:.1f}s; best v"
          f"{best['policy_version']} validated {best['mean']:.1f}, tested {test['mean']:.1f}; last v{last}")

    retest = _rlfleet("test", str(run_dir), "--episodes", "10", timeout=120)
    assert retest.returncode == 0, retest.stdout + retest.stderr
    assert "solved   no threshold (env.solve_threshold is null)" in retest.stdout
    runs = _rlfleet("runs", str(data_dir), timeout=60)
    assert runs.returncode == 0 and runs.stdout.splitlines()[1].split()[-3:] == ["no", "threshold", "-"], runs.stdout
