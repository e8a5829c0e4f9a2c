"""bench/pong_curve.py: the rlfleet arm through a real `rlfleet up` (on CartPole, to a budget it ends on), the
curve file, plot and last line it writes, the frame marks it reads, and an unknown arm refused."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest

from bench.pong_curve import at_frames
from tests.support.repo import REPO, run_bench


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_bench("pong_curve.py", *args, timeout=600)


@pytest.mark.slow
def test_the_rlfleet_arm_draws_the_runs_own_curve_to_the_frame_budget(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # 12,288 env steps of CartPole PPO: the run ends on its budget (exit 1) or solved (exit 0), both a curve
    done = run("--config", str(REPO / "configs/cartpole_ppo.yaml"), "--arms", "rlfleet", "--frames", "49152",
               "--out", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    with open(out / "curves.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and {r["arm"] for r in rows} == {"rlfleet"}
    frames = [int(r["frames"]) for r in rows]
    assert frames == sorted(frames) and all(f % 4 == 0 for f in frames)
    (summary,) = (out / "rlfleet" / "runs").glob("*/summary.json")
    ended = json.loads(summary.read_text())
    assert ended["run_state"] in ("budget_exhausted", "solved") and 0 < frames[-1] <= 4 * ended["env_steps"]
    assert all(float(r["recent_return_mean"]) > 0 for r in rows)  # CartPole pays 1 a step
    assert (out / "pong_curve.png").stat().st_size > 0
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith(f"pong_curve: rlfleet frames={frames[-1]} wall=")


def test_frame_marks_read_the_first_point_at_or_past_them() -> None:
    rows = [(4096, 10.0, -21.0), (8192, 20.0, -20.5), (12288, 30.0, -19.0)]
    assert at_frames(rows, 4096) == (10.0, -21.0)
    assert at_frames(rows, 5000) == (20.0, -20.5)
    assert at_frames(rows, 12289) is None


def test_an_unknown_arm_is_refused_naming_the_arms() -> None:
    done = run("--arms", "rlfleet,sample_factory")
    assert done.returncode == 2 and "--arms: unknown ['sample_factory']; choose from rlfleet, sb3" in done.stderr
