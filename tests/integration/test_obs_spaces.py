"""Observations that are not a Box, through the whole stack: collectors store their integers, the learner and every
actor read them one-hot from the manifest's parts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlfleet.shared.payloads.spaces import DiscretePart, MultiDiscretePart
from rlfleet.shared.policy.files import read_manifest
from tests.support.repo import REPO

PPO = {"name": "ppo", "net": {"hidden": [32], "activation": "tanh"}, "learning_rate": 0.003, "gamma": 0.9,
       "gae_lambda": 0.9, "epochs": 4, "minibatch_size": 128, "entropy_coef": 0.0}
COMMON = {
    "collector": {"num_envs": 4, "chunk_steps": 32},
    "replay": {"sampler": "fifo", "capacity_transitions": 4096, "min_transitions": 1, "max_use": 1,
               "tolerance_transitions": 1024},
    "sampling": {"unit": "chunk", "min_batch_size": 128, "max_batch_size": 256, "force_sync": True},
    "algo": PPO,
    "evaluation": {"episodes": 10, "num_envs": 10},
}


def up(tmp_path: Path, config: dict[str, Any]) -> tuple[dict[str, Any], Path]:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [sys.executable, "-m", "rlfleet.launcher", "up", "--config", str(path), "--data-dir", str(tmp_path / "data"),
         "--port", "0"],
        cwd=REPO, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "data" / "runs").iterdir()
    return json.loads((run_dir / "summary.json").read_text()), run_dir


@pytest.mark.slow
def test_ppo_learns_a_discrete_observation_it_can_only_read_one_hot(tmp_path: Path) -> None:
    """Cue: act (cue - 1) on a Discrete(4, start=1) cue; solved (8 of 8) only by a policy that reads the cue."""
    summary, run_dir = up(tmp_path, {
        "name": "cue", **COMMON,
        "env": {"id": "tests.support.userenv:Cue", "kwargs": {"n": 4, "length": 8}, "solve_threshold": 7.5},
        "budget": {"max_env_steps": 60_000, "max_wall_seconds": 120},
    })
    assert summary["run_state"] == "solved", summary["run_message"]
    assert summary["env_errors"] == 0 and summary["corrupt_chunks"] == 0
    manifest = read_manifest((run_dir / "best" / "policy.safetensors").read_bytes())
    assert manifest.spaces.obs.parts == (DiscretePart(n=4, start=1),) and manifest.spaces.obs.dtype == "uint8"
    print(f"solved: {summary['env_steps']} env steps, {summary['wall_seconds']:.1f}s")


@pytest.mark.slow
def test_a_popgym_env_runs_through_a_short_run(tmp_path: Path) -> None:
    pytest.importorskip("popgym", reason="the popgym extra (pip install 'rlfleet[popgym]') is not installed")
    summary, run_dir = up(tmp_path, {
        "name": "repeat-previous", **COMMON,
        "env": {"id": "popgym.envs.repeat_previous:RepeatPreviousEasy", "solve_threshold": None,
                "wrappers": [{"name": "frame_stack", "frames": 4}]},
        "budget": {"max_env_steps": 4096, "max_wall_seconds": 120},
    })
    assert summary["run_state"] == "budget_exhausted" and summary["latest_test"] is not None
    assert summary["env_errors"] == 0 and summary["corrupt_chunks"] == 0
    assert abs(summary["best_evaluation"]["mean"]) <= 1.0 + 1e-9  # POPGym scales every return into [-1, 1]
    manifest = read_manifest((run_dir / "best" / "policy.safetensors").read_bytes())
    assert manifest.spaces.obs.parts == (MultiDiscretePart(nvec=(4,) * 4, start=(0,) * 4),)
    assert summary["payload_bytes_per_env_step"] < 60  # 4 bytes of obs and of next_obs a row, not 16 floats each
