"""Fault injection: kill -9 a collector, the learner and the coordinator mid-run; the run must still solve,
with every acknowledged chunk counted exactly once and no orphan payloads left after garbage collection.

The kills must all land before the run can solve (CartPole sometimes yields a lucky greedy policy after a
few hundred updates), so the first policy is published only at iteration 1000: the learner is killed at 200+
iterations, before any policy exists, and the coordinator as soon as the restarted learner registers."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from rlfleet.coordinator.journal.database import Journal
from rlfleet.coordinator.run import Run
from rlfleet.launcher.up import free_port
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.tokens import load_tokens_file
from rlfleet.shared.wire import Status
from tests.support.processes import launcher_child
from tests.support.repo import REPO


@pytest.mark.slow
def test_run_survives_kill_9_of_collector_learner_and_coordinator(tmp_path: Path) -> None:
    port = free_port()
    up = subprocess.Popen(
        [sys.executable, "-m", "rlfleet.launcher", "up", "--config", "configs/cartpole_dqn.yaml", "--data-dir",
         str(tmp_path), "--port", str(port), "--seed", "3", "--set", "algo.publish_every=1000",
         "--set", "algo.checkpoint_every=100"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
    )
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5)

    def status() -> Status | None:
        tokens = tmp_path / "tokens.json"
        if not tokens.exists():
            return None
        try:
            resp = http.get("/v1/status", headers={"Authorization": f"Bearer {load_tokens_file(tokens)['read']}"})
            return Status.model_validate_json(resp.content) if resp.status_code == 200 else None
        except httpx.TransportError:
            return None

    def wait(cond: Callable[[Status], bool], what: str, timeout: float = 180) -> Status:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert up.poll() is None, f"rlfleet up ended before {what}:\n{up.stdout.read() if up.stdout else ''}"
            st = status()
            if st is not None and cond(st):
                return st
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}")

    def kill(service: str) -> None:
        pid = launcher_child(up.pid, service)
        assert pid is not None, f"no {service} process under rlfleet up"
        os.kill(pid, signal.SIGKILL)

    try:
        wait(lambda s: s.chunks >= 2, "first chunks")
        kill("collector")
        trained = wait(lambda s: s.learner.iteration >= 200, "the learner's first checkpoints")
        assert trained.policy_version == 0, "a policy was published before the learner could be killed"
        (old_learner,) = [w.worker_id for w in trained.workers if w.kind == "learner"]
        kill("learner")
        wait(lambda s: any(w.kind == "learner" and w.worker_id != old_learner for w in s.workers),
             "the restarted learner's registration")
        kill("coordinator")
        out, _ = up.communicate(timeout=600)
    finally:
        if up.poll() is None:
            up.kill()
        http.close()
    print(out[-1500:])
    assert up.returncode == 0, out[-4000:]
    assert "run solved" in out
    for service in ("collector", "learner", "coordinator"):
        assert f"{service}" in out.split("restarts:")[-1], out[-2000:]

    (run_dir,) = (tmp_path / "runs").iterdir()
    assert "resumed from iteration" in (run_dir / "logs" / "learner.log").read_text()
    summary = json.loads((run_dir / "summary.json").read_text())  # the final /v1/status
    assert summary["coordinator_resumes"] == 1
    assert {w["kind"] for w in summary["workers"] if w["restarts"] >= 1} == {"collector", "learner"}
    db = sqlite3.connect(run_dir / "coordinator.sqlite")
    rows = db.execute("SELECT chunk_id, transitions FROM chunks").fetchall()
    env_steps = int(json.loads(db.execute("SELECT value FROM meta WHERE key='data'").fetchone()[0])["env_steps"])
    db.close()
    assert len({cid for cid, _ in rows}) == len(rows)  # no chunk id counted twice
    assert env_steps == sum(n for _, n in rows)  # counters equal the sum over acknowledged chunks, exactly

    # Garbage collection (grace 0 now that every writer has stopped) leaves exactly the referenced payloads.
    store = LocalStore(run_dir / "store")
    run = Run(RunConfig(), store, journal=Journal(run_dir / "coordinator.sqlite"))
    run.ctx.payloads.collect_garbage(run.housekeeping.referenced_payloads(), grace_seconds=0)
    on_disk = {p.relative_to(store.root).as_posix() for p in (store.root / "chunks").rglob("*") if p.is_file()}
    assert on_disk == {e.payload_path for e in run.ctx.data.buffer.entries()}
    run.ctx.close()
    run.ctx.journal.close()
