"""Pixel envs through the real services on loopback: MinAtar's boolean frames plan, collect and train (they once
crashed the coordinator at start-up, then collectors, whose env seeds were beyond MinAtar's 32 bits)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlfleet.shared.config.run_config import dump_run_config, load_run_config
from rlfleet.shared.policy.files import read_manifest
from tests.support.configs import shipped
from tests.support.fleet import Fleet
from tests.support.repo import REPO

pytest.importorskip("minatar", reason="the minatar extra (pip install 'rlfleet[minatar]') is not installed")
MINATAR = shipped("minatar_breakout_dqn.yaml")
THRESHOLD = 6  # random play ~0.5; solved here in 67, 101, 110 s (67k-100k env steps); the config's 10: > 5 min


def test_a_minatar_run_starts_and_its_collectors_chunks_arrive(tmp_path: Path, data_dir: Path,
                                                               tokens: dict[str, str]) -> None:
    config = load_run_config(MINATAR, {"replay.min_transitions": 256})
    config_file = tmp_path / "minatar.yaml"
    config_file.write_text(dump_run_config(config))
    fleet = Fleet(tmp_path, data_dir, config_file, tokens, {"RLFLEET_RUN": config.name})
    try:
        fleet.start_coordinator()
        fleet.start_worker("collector-a", "collector")
        fleet.start_worker("collector-b", "collector")  # a second claim: a second seed block, still 32-bit
        fleet.wait_for(lambda: fleet.status().buffers[0].chunks >= 4, 120, "chunks from both collectors")
        status = fleet.status()
        assert status.seeds is not None and status.env_errors == 0 and len(status.seeds.train) == 2
        assert all(0 <= seed < 2**32 for seed in status.seeds.train)
    finally:
        fleet.close()


@pytest.mark.slow
def test_minatar_breakout_dqn_trains_through_rlfleet_up_to_a_threshold(tmp_path: Path) -> None:
    """The CI-sized pixel end-to-end run (issue 24, item 9): the shipped config with a lower threshold, so it is
    solved (a confirmed held-out test) in a few minutes on 2 cores."""
    done = subprocess.run(
        [sys.executable, "-m", "rlfleet.launcher", "up", "--config", str(MINATAR), "--data-dir", str(tmp_path / "data"),
         "--port", "0", "--set", f"env.solve_threshold={THRESHOLD}", "--set", "budget.max_wall_seconds=420"],
        cwd=REPO, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "data" / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_state"] == "solved"
    manifest = read_manifest((run_dir / "best" / "policy.safetensors").read_bytes())
    assert manifest.encoder.kind == "cnn" and manifest.spaces.obs.image_max == 1
    print(f"solved: {summary['env_steps']} env steps, {summary['wall_seconds']:.1f}s")
