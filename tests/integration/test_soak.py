"""Soak: SIGKILL a random service every 12 s for minutes on end while runs train. Every run must still solve,
every killed service must come back (a supervised restart; a killed coordinator resumes its journal), and
each run's journalled counters must equal the sum over its acknowledged chunks.

CartPole sometimes solves within seconds by a lucky greedy evaluation, so one run cannot be relied on to
last the whole soak: when a run ends before the soak does, the next run (next seed) starts and the killing
goes on. `RLFLEET_SOAK_SECONDS` sets the killing phase: CI runs 60 s (and on until every kind of service was
killed); `scripts/soak.sh` runs 300 s and more.
"""

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

from rlfleet.launcher.up import free_port
from tests.support.processes import launcher_child
from tests.support.repo import REPO

SERVICES = ("coordinator", "learner", "evaluator", "collector")
KILL_EVERY = 12.0


def _children(parent: int, service: str) -> list[int]:
    pids: list[int] = []
    while (pid := launcher_child(parent, service, exclude=pids)) is not None:
        pids.append(pid)
    return pids


def _check_journal(run_dir: Path, coordinator_kills: int) -> dict[str, int]:
    summary = json.loads((run_dir / "summary.json").read_text())  # the final /v1/status
    # Every coordinator kill is resumed, except one that lands as the run ends (nothing restarts it then).
    assert coordinator_kills - 1 <= summary["coordinator_resumes"] <= coordinator_kills, summary["coordinator_resumes"]
    db = sqlite3.connect(run_dir / "coordinator.sqlite")
    rows = db.execute("SELECT chunk_id, transitions FROM chunks").fetchall()
    data = json.loads(db.execute("SELECT value FROM meta WHERE key='data'").fetchone()[0])
    db.close()
    assert len({cid for cid, _ in rows}) == len(rows) == data["chunks"]  # no chunk counted twice
    assert data["env_steps"] == sum(n for _, n in rows) == summary["env_steps"]
    return {"env_steps": data["env_steps"], "chunks": data["chunks"]}


def _soak_one_run(data_dir: Path, seed: int, rng: random.Random, order: list[str],
                  until: float) -> tuple[list[str], str]:
    """One `rlfleet up` run, killing a random service every KILL_EVERY s until it ends or `until` passes."""
    data_dir.mkdir(parents=True)
    # Its output goes to a file, not a pipe read only at the end: a full pipe would block the supervisor.
    out_path = data_dir / "up.out"
    with open(out_path, "wb") as out_file:
        up = subprocess.Popen(
            [sys.executable, "-m", "rlfleet.launcher", "up", "--config", "configs/cartpole_dqn.yaml", "--data-dir",
             str(data_dir), "--port", str(free_port()), "--seed", str(seed)],
            cwd=REPO, stdout=out_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "RLFLEET_IDEMPOTENCY_SECONDS": "7200"},  # keep every chunk row for the final check
        )
    kills: list[str] = []

    def over() -> bool:  # the run ended (rlfleet up is draining its services): nothing is restarted any more
        return up.poll() is not None or "stopping services" in out_path.read_text(errors="replace")

    try:
        while time.monotonic() < until and not over():
            time.sleep(KILL_EVERY)
            if not order:  # random order, but every kind of service within each round of four kills
                order.extend(rng.sample(SERVICES, len(SERVICES)))
            service = order[-1]  # taken off the order only once killed: a run's end never skips a kind
            pids = _children(up.pid, service)
            if not pids or over():
                continue
            order.pop()
            victim = rng.choice(pids)
            os.kill(victim, signal.SIGKILL)
            kills.append(service)

            def back() -> bool:  # as many as before, the victim not counted (it lingers in /proc while it dies)
                return len(set(_children(up.pid, service)) - {victim}) == len(pids)  # noqa: B023

            deadline = time.monotonic() + KILL_EVERY
            while time.monotonic() < deadline and not over() and not back():
                time.sleep(0.2)
            assert over() or back(), \
                f"{service} did not come back within {KILL_EVERY:.0f}s of its kill:\n{out_path.read_text()[-3000:]}"
        up.wait(timeout=900)
    finally:
        if up.poll() is None:
            up.kill()
    out = out_path.read_text(errors="replace")
    assert up.returncode == 0 and "run solved" in out, f"seed {seed}, kills {kills}:\n{out[-4000:]}"
    return kills, out


@pytest.mark.slow
def test_runs_solve_while_a_random_service_is_killed_every_12_seconds(tmp_path: Path) -> None:
    soak = float(os.environ.get("RLFLEET_SOAK_SECONDS", "60"))
    rng = random.Random(0)
    started = time.monotonic()
    all_kills: list[str] = []
    order: list[str] = []
    seed = 0
    # At least `soak` seconds, and on until every kind of service was killed (runs that solve by luck within
    # seconds see few kills), but never past three times the soak.
    while (time.monotonic() - started < soak or set(all_kills) != set(SERVICES)) and \
            time.monotonic() - started < 3 * soak:
        seed += 1
        data_dir = tmp_path / f"seed{seed}"
        until = max(started + soak, time.monotonic() + 4 * KILL_EVERY)
        kills, out = _soak_one_run(data_dir, seed, rng, order, until)
        (run_dir,) = (data_dir / "runs").iterdir()
        counts = _check_journal(run_dir, kills.count("coordinator"))
        all_kills += kills
        print(f"run {seed}: solved after {len(kills)} kills {kills}; {counts}\n{out.splitlines()[-1]}", flush=True)
    print(f"soak: {len(all_kills)} kills over {time.monotonic() - started:.0f}s in {seed} runs")
    assert len(all_kills) >= soak // KILL_EVERY - 2 * seed  # one kill every 12 s, but for run start-ups
    assert set(all_kills) == set(SERVICES), all_kills  # every kind of service was killed at least once
