"""A user's own env, given as `module:Class` with kwargs, with image observations (alone, or in a Dict beside the
goal's coordinates): trained through the whole stack (the coordinator plans it from a child process, collectors
act through the CNN in torch)."""

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
    "name": "pixel-grid",
    "env": {"id": "tests.support.pixelgrid:PixelGrid", "kwargs": {"max_steps": 16}, "solve_threshold": 0.8},
    "collector": {"num_envs": 8, "chunk_steps": 32},
    "replay": {"sampler": "fifo", "capacity_transitions": 4096, "min_transitions": 1, "max_use": 1,
               "tolerance_transitions": 1024},
    "sampling": {"unit": "chunk", "min_batch_size": 256, "max_batch_size": 512, "force_sync": True},
    "algo": {"name": "ppo", "net": {"hidden": [64], "activation": "relu"}, "learning_rate": 0.001,
             "gamma": 0.95, "gae_lambda": 0.9, "epochs": 4, "minibatch_size": 128, "entropy_coef": 0.01},
    "evaluation": {"episodes": 20, "num_envs": 10},
    "budget": {"max_env_steps": 200_000, "max_wall_seconds": 600},
}


@pytest.mark.slow
@pytest.mark.parametrize("env_class", ["PixelGrid", "DictPixelGrid"])
def test_a_user_image_env_given_as_an_entry_point_trains_through_the_stack(tmp_path: Path, env_class: str) -> None:
    config = tmp_path / "pixel_grid.yaml"
    env = {**CONFIG["env"], "id": f"tests.support.pixelgrid:{env_class}"}  # type: ignore[dict-item]
    config.write_text(yaml.safe_dump({**CONFIG, "env": env}))
    done = subprocess.run(
        [sys.executable, "-m", "rlfleet.launcher", "up", "--config", str(config), "--data-dir", str(tmp_path / "data"),
         "--port", "0"],
        cwd=REPO, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "data" / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_state"] == "solved" and summary["best_evaluation"]["mean"] >= 0.8
    manifest = read_manifest((run_dir / "best" / "policy.safetensors").read_bytes())
    assert manifest.encoder.kind == "cnn" and manifest.spaces.obs.dtype == "uint8"
    assert bool(manifest.spaces.obs.image_parts) == (env_class == "DictPixelGrid")  # the multi-input encoder
    print(f"solved: {summary['env_steps']} env steps, {summary['wall_seconds']:.1f}s")
