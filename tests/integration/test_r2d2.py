"""`rlfleet up` trains r2d2 on a task only memory solves: a cue shown at an episode's first step must be named at its
last (episodes of 8 steps, chunks of 12 rows, sequences of 4), so the collectors' stored core states, sequences
served from the middle of episodes and warmed up over the rows before them, prioritized sequences and the
evaluator's per-episode resets all have to work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlfleet.shared.policy.files import read_manifest
from tests.support.repo import REPO

CONFIG = {
    "name": "recall-r2d2",
    "env": {"id": "tests.support.userenv:RecallEnv", "kwargs": {"length": 8}, "solve_threshold": 0.95},
    "collector": {"num_envs": 16, "chunk_steps": 12, "epsilon": {"start": 1.0, "end": 0.05,
                                                                 "decay_env_steps": 4000}},
    "replay": {"sampler": "prioritized", "capacity_transitions": 20_000, "min_transitions": 768,
               "samples_per_insert": 32, "tolerance_transitions": 1024},
    "sampling": {"unit": "sequence", "sequence_length": 4},
    "algo": {"name": "r2d2", "net": {"hidden": [16], "core": {"kind": "gru", "hidden": 16}},
             "learning_rate": 0.003, "gamma": 0.99, "n_step": 4, "burn_in": 4, "batch_size": 32,
             "batches_per_request": 8, "target_update_every": 50, "publish_every": 25},
    "evaluation": {"episodes": 20, "num_envs": 10},
    "budget": {"max_env_steps": 100_000, "max_wall_seconds": 80},
}


@pytest.mark.slow
def test_r2d2_learns_to_recall_a_cue_through_the_stack(tmp_path: Path) -> None:
    config = tmp_path / "recall.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    done = subprocess.run(
        [sys.executable, "-m", "rlfleet.launcher", "up", "--config", str(config), "--data-dir", str(tmp_path / "data"),
         "--port", "0"],
        cwd=REPO, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "data" / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_state"] == "solved" and summary["best_evaluation"]["mean"] >= 0.95, summary["run_state"]
    manifest = read_manifest((run_dir / "best" / "policy.safetensors").read_bytes())
    assert manifest.core is not None and manifest.head == "q_values"
    print(f"solved: {summary['env_steps']} env steps, {summary['wall_seconds']:.1f}s")
