"""A frame-stacked image run through the whole stack (`rlfleet up` on loopback): collectors write compact,
zstd-compressed chunks, the learner rebuilds the stacks and trains on them, nothing is refused as corrupt, and
status reports the bytes each env step cost."""

from __future__ import annotations

import json
import subprocess
import sys
import time
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


def _first_chunk_while_running(up: subprocess.Popen[bytes], runs: Path, deadline: float) -> bytes | None:
    """The bytes of the first chunk file seen in the store while the run goes on. Read during the run, not after:
    an on-policy learner consumes every chunk (max_use 1) and the store deletes what it consumed, so whether any
    is left at the end depends only on how the last batch fell."""
    while up.poll() is None and time.monotonic() < deadline:
        for path in runs.glob("*/store/chunks/**/*.msgpack"):
            try:
                return path.read_bytes()
            except FileNotFoundError:  # consumed and deleted between the listing and the read
                continue
        time.sleep(0.02)
    return None


def test_a_frame_stacked_image_run_trains_on_compact_chunks(tmp_path: Path) -> None:
    config = tmp_path / "frames.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    log = tmp_path / "up.log"
    with log.open("wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "rlfleet.launcher", "up", "--config", str(config), "--data-dir",
             str(tmp_path / "data"), "--port", "0"],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 400
            chunk = _first_chunk_while_running(up, tmp_path / "data" / "runs", deadline)
            returncode = up.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            if up.poll() is None:
                up.kill()
                up.wait()
    assert returncode == 0, log.read_text()[-6000:]
    (run_dir,) = (tmp_path / "data" / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_state"] == "budget_exhausted" and summary["env_steps"] >= 2048
    assert summary["learner"]["iteration"] > 0 and summary["corrupt_chunks"] == 0
    # Flat, each env step would hold obs and next_obs: 2 x 4 x 42 = 336 bytes of pixels alone.
    assert summary["payload_bytes_per_env_step"] < 336 / 2
    assert chunk is not None, "no chunk file was seen in the store while the run went on"
    arrays = msgpack.unpackb(chunk)["arrays"]
    assert "frame" in arrays and "obs" not in arrays and "next_obs" not in arrays
