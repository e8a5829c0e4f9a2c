"""`rlfleet pbt` over real runs: a pair of PPO runs on CartPole where the worse one loads the better one's
checkpoint and perturbs its live settings; the lineage, its plot, the held-out test of the best and the report
are written. Killing the driver stops every member's run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.support.processes import alive, descendants
from tests.support.repo import REPO


def _spec(tmp_path: Path, max_env_steps: int) -> Path:
    spec = {"name": "cartpole-pair", "base_config": str(REPO / "configs" / "cartpole_ppo.yaml"), "population": 2,
            "interval_env_steps": 2048, "quantile": 0.5, "collectors": 1, "seed": 0,
            "set": {"budget.max_env_steps": max_env_steps, "budget.max_wall_seconds": 240,
                    "evaluation.episodes": 10},
            "space": {"algo.learning_rate": {"low": 1e-4, "high": 3e-3, "log": True},
                      "algo.clip_range": {"low": 0.1, "high": 0.3}},
            "test": {"episodes": 10, "num_envs": 10}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_pair_exploits_and_explores_through_real_runs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "rlfleet.launcher", "pbt", str(_spec(tmp_path, 8192)),
                           "--output-dir", str(out)], cwd=REPO, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in (out / "lineage.jsonl").read_text().splitlines()]
    copies = [r for r in rows if r["event"] == "exploit"]
    assert copies, rows
    copy = copies[0]
    assert copy["source"] != copy["member"] and copy["source_score"] >= copy["score"]
    assert copy["old_settings"] != copy["new_settings"]
    for key, value in copy["new_settings"].items():  # perturbed from the source's settings, inside the space
        assert {"algo.learning_rate": (1e-4, 3e-3), "algo.clip_range": (0.1, 0.3)}[key][0] <= value <= \
               {"algo.learning_rate": (1e-4, 3e-3), "algo.clip_range": (0.1, 0.3)}[key][1]
    run_dir = next((out / "members" / copy["member"] / "data" / "runs").iterdir())
    learner_log = (run_dir / "logs" / "learner.log").read_text()
    assert "continuing from checkpoint load" in learner_log  # the copier's learner took the weights up
    assert "live settings changed: learning_rate" in learner_log
    assert (out / "lineage.png").stat().st_size > 10_000
    report = (out / "pbt_report.md").read_text()
    assert "copies: " in report and "## Held-out test of the population's best" in report
    test = json.loads((out / "best_test.json").read_text())
    assert test["episodes"] == 10 and test["seeds"]["counter"] >= 0
    assert f"held-out test {test['mean']:.2f}" in done.stdout


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_killing_the_driver_stops_every_members_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    driver = subprocess.Popen([sys.executable, "-m", "rlfleet.launcher", "pbt", str(_spec(tmp_path, 1_000_000)),
                               "--output-dir", str(out)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(list(out.glob("members/*/data/runs/*/coordinator.sqlite"))) < 2:
            time.sleep(0.5)
        time.sleep(3)  # the members' workers start
        members = descendants(driver.pid)
        assert len(members) >= 2 * 4, members  # per member: rlfleet up, coordinator, learner, collector, evaluator
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(timeout=150) == 130
        stop = time.monotonic() + 10
        while time.monotonic() < stop and any(alive(pid) for pid in members):
            time.sleep(0.2)
        assert not [pid for pid in members if alive(pid)]
    finally:
        if driver.poll() is None:
            driver.kill()
