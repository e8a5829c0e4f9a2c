"""`rlfleet up` trains a recurrent policy on a task only memory solves: recurrent_ppo (synchronous) and
recurrent_impala (asynchronous collectors, V-trace) remember a cue shown at an episode's first step until its last,
across chunk boundaries (episodes of 8 steps, chunks of 6), so collectors' stored core states, the learner's
unrolling from them and the evaluator's per-episode resets all have to work."""

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
    "name": "recall",
    "env": {"id": "tests.support.userenv:RecallEnv", "kwargs": {"length": 8}, "solve_threshold": 0.95},
    "collector": {"num_envs": 16, "chunk_steps": 6},
    "replay": {"sampler": "fifo", "capacity_transitions": 4096, "min_transitions": 1, "max_use": 1,
               "tolerance_transitions": 1024},
    "sampling": {"unit": "chunk", "min_batch_size": 96, "max_batch_size": 192, "max_wait_seconds": 1.0,
                 "force_sync": True},
    "algo": {"name": "recurrent_ppo", "net": {"hidden": [16], "activation": "tanh",
                                              "core": {"kind": "gru", "hidden": 16}},
             "learning_rate": 0.003, "gamma": 1.0, "gae_lambda": 1.0, "epochs": 4, "minibatch_size": 48},
    "evaluation": {"episodes": 20, "num_envs": 10},
    "budget": {"max_env_steps": 100_000, "max_wall_seconds": 80},
}


# The V-trace learner with collectors that never wait for the policy trained on their data (chunks at most 4
# versions old), and APPO's clip for its several epochs per batch.
ASYNCHRONOUS = {
    **CONFIG,
    "sampling": {**CONFIG["sampling"], "force_sync": False, "max_wait_seconds": 0.05,  # type: ignore[dict-item]
                 "max_policy_lag": 4},
    "algo": {"name": "recurrent_impala", "net": CONFIG["algo"]["net"], "learning_rate": 0.003,  # type: ignore[index]
             "gamma": 1.0, "epochs": 4, "clip_ratio": 0.2, "entropy_coef": 0.01, "max_grad_norm": 0.5},
}


@pytest.mark.slow
@pytest.mark.parametrize("run", [CONFIG, ASYNCHRONOUS], ids=["recurrent_ppo", "recurrent_impala"])
def test_a_recurrent_learner_learns_to_recall_a_cue_through_the_stack(tmp_path: Path, run: dict) -> None:
    config = tmp_path / "recall.yaml"
    config.write_text(yaml.safe_dump(run))
    done = subprocess.run(
        [sys.executable, "-m", "rlfleet.launcher", "up", "--config", str(config), "--data-dir", str(tmp_path / "data"),
         "--port", "0"],
        cwd=REPO, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "data" / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_state"] == "solved" and summary["best_evaluation"]["mean"] >= 0.95, summary["run_state"]
    manifest = read_manifest((run_dir / "best" / "policy.safetensors").read_bytes())
    assert manifest.core is not None and manifest.core.kind == "gru"
    print(f"solved: {summary['env_steps']} env steps, {summary['wall_seconds']:.1f}s")
