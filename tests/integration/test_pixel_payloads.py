"""A frame-stacked image run through the whole stack (`rlfleet up` on loopback): collectors write compact,
zstd-compressed chunks, the learner rebuilds the stacks and trains on them, nothing is refused as corrupt, and
status reports the bytes each env step cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgpack
import yaml

from tests.support.repo import REPO

CONFIG = {
    "name": "frame-stacked",
    # Grayscale 6x7 frames (every pixel distinct noise), stacked 4 deep: a [4, 6, 7] uint8 image per step.
    "env": {"id": "tests.support.frames:Frames", "kwargs": {"channels": 0, "max_steps": 12},
            "wrappers": [{"name": "frame_stack", "frames": 4}], "solve_threshold": None},
    "collector": {"num_envs": 4, "chunk_steps": 32},
    "replay": {"sampler": "fifo", "capacity_transitions": 2048, "min_transitions": 1, "max_use": 1,
               "tolerance_transitions": 1024},
    "sampling": {"unit": "chunk", "min_batch_size": 128, "max_batch_size": 256, "force_sync": True},
    "algo": {"name": "ppo", "net": {"hidden": [32], "activation": "relu"}, "epochs": 1, "minibatch_size": 64},
    "evaluation": {"episodes": 4, "num_envs": 2},
    "budget": {"max_env_steps": 2048, "max_wall_seconds": 240},
}


def test_a_frame_stacked_image_run_trains_on_compact_chunks(tmp_path: Path) -> None:
    config = tmp_path / "frames.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    done = subprocess.run(
        [sys.executable, "-m", "rlfleet.launcher", "up", "--config", str(config), "--data-dir", str(tmp_path / "data"),
         "--port", "0"],
        cwd=REPO, capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "data" / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_state"] == "budget_exhausted" and summary["env_steps"] >= 2048
    assert summary["learner"]["iteration"] > 0 and summary["corrupt_chunks"] == 0
    # Flat, each env step would hold obs and next_obs: 2 x 4 x 42 = 336 bytes of pixels alone.
    assert summary["payload_bytes_per_env_step"] < 336 / 2
    payloads = list((run_dir / "store" / "chunks").rglob("*.msgpack"))
    assert payloads
    arrays = msgpack.unpackb(payloads[0].read_bytes())["arrays"]
    assert "frame" in arrays and "obs" not in arrays and "next_obs" not in arrays
