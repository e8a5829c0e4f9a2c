"""Soak: SIGKILL a random service every 12 s for at least five minutes of a run that takes longer than that to
solve. The run must still solve, every killed service must come back (supervised restart, or a resumed
coordinator), and the journal's counters must equal the sum over the acknowledged chunks.

The run is PPO on CartPole with a learning rate 50x below the tuned one, so learning is slow and steady:
it needs several minutes, and the kills land during real training, not after it. `RLFLEET_SOAK_SECONDS`
sets the killing phase (default 300); `scripts/soak.sh` runs the long form."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.up import free_port
from tests.conftest import REPO
from tests.integration.test_faults import _child

SERVICES = ("coordinator", "learner", "evaluator", "collector")
KILL_EVERY = 12.0


def _children(parent: int, service: str) -> list[int]:
    pids = []
    while (pid := _child(parent, service, exclude=pids)) is not None:
        pids.append(pid)
    return pids


@pytest.mark.slow
def test_run_solves_while_a_random_service_is_killed_every_12_seconds(tmp_path: Path) -> None:
    soak = float(os.environ.get("RLFLEET_SOAK_SECONDS", "300"))
    port = free_port()
    up = subprocess.Popen(
        [sys.executable, "-m", "launcher", "up", "--config", "configs/cartpole_ppo.yaml", "--data-dir",
         str(tmp_path), "--port", str(port), "--seed", "1", "--set", "ppo.learning_rate=0.00002",
         "--set", "budget.max_wall_seconds=2400", "--set", "budget.max_env_steps=3000000"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
        env={**os.environ, "RLFLEET_IDEMPOTENCY_SECONDS": "7200"},
    )
    rng = random.Random(0)
    kills: list[tuple[float, str]] = []
    started = time.monotonic()
    try:
        time.sleep(KILL_EVERY)
        while time.monotonic() - started < soak and up.poll() is None:
            service = rng.choice(SERVICES)
            pids = _children(up.pid, service)
            if pids:
                os.kill(rng.choice(pids), signal.SIGKILL)
                kills.append((time.monotonic() - started, service))
                deadline = time.monotonic() + KILL_EVERY
                while time.monotonic() < deadline and len(_children(up.pid, service)) < len(pids):
                    time.sleep(0.2)
                assert len(_children(up.pid, service)) == len(pids) or up.poll() is not None, \
                    f"{service} did not come back within {KILL_EVERY:.0f}s of its kill"
            time.sleep(max(0.0, kills[-1][0] + KILL_EVERY - (time.monotonic() - started)) if kills else KILL_EVERY)
        survived = time.monotonic() - started
        out, _ = up.communicate(timeout=2400)
    finally:
        if up.poll() is None:
            up.kill()
    print(f"{len(kills)} kills over {survived:.0f}s: {kills}\n{out[-1500:]}")
    assert survived >= soak, f"the run ended after {survived:.0f}s, before the soak's {soak:.0f}s:\n{out[-3000:]}"
    assert len(kills) >= soak // KILL_EVERY - 1
    assert {s for _, s in kills} == set(SERVICES), kills  # every kind of service was killed at least once
    assert up.returncode == 0 and "run solved" in out, out[-4000:]

    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())  # the final /v1/status
    assert summary["coordinator_resumes"] == sum(s == "coordinator" for _, s in kills)
    db = sqlite3.connect(run_dir / "coordinator.sqlite")
    rows = db.execute("SELECT chunk_id, transitions FROM chunks").fetchall()
    data = json.loads(db.execute("SELECT value FROM meta WHERE key='data'").fetchone()[0])
    db.close()
    assert len({cid for cid, _ in rows}) == len(rows) == data["chunks"]  # no chunk counted twice
    assert data["env_steps"] == sum(n for _, n in rows) == summary["env_steps"]
