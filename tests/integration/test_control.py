"""The control plane against real processes: `rlfleet ctl` pauses and resumes collection, makes the learner
checkpoint and the evaluator validate and test now, and changes a live setting the collectors then act on; a collector
the rate limiter holds waits in a long poll until the learner samples."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from rlfleet.shared.config.run_config import RunConfig, dump_run_config
from tests.support.configs import small_run_config
from tests.support.fleet import Fleet
from tests.support.repo import REPO


def ctl(fleet: Fleet, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "rlfleet.launcher", "ctl", *args, "--url", fleet.url, "--tokens-file",
                           str(fleet.data_dir / "tokens.json")], cwd=REPO, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def checkpoints(fleet: Fleet) -> list[Path]:
    return sorted((fleet.data_dir / "runs").glob("*/checkpoints/*"))


@pytest.mark.slow
def test_operator_steers_a_running_run(tmp_path: Path, data_dir: Path, tokens: dict[str, str]) -> None:
    data = small_run_config().model_dump(mode="json")
    data["env"]["solve_threshold"] = 1000  # never solved: the operator ends it
    data["algo"]["checkpoint_every"] = 1_000_000  # only the operator's request (and the end) checkpoints
    config_file = tmp_path / "run.yaml"
    config_file.write_text(dump_run_config(RunConfig.model_validate(data)))
    fleet = Fleet(tmp_path, data_dir, config_file, tokens)
    try:
        fleet.start_coordinator()
        for name, service in (("learner", "learner"), ("evaluator", "evaluator"), ("collector-a", "collector")):
            fleet.start_worker(name, service)
        fleet.wait_for(lambda: fleet.status().learner.iteration > 0 and fleet.status().latest_evaluation is not None,
                       120, "training and a first validation")

        assert "collection paused" in ctl(fleet, "pause")
        time.sleep(2)  # chunks in flight land
        paused_at = fleet.status().env_steps
        time.sleep(3)
        assert fleet.status().env_steps == paused_at, "collectors kept collecting while paused"
        assert "collection running" in ctl(fleet, "resume")
        fleet.wait_for(lambda: fleet.status().env_steps > paused_at, 30, "collection to resume")

        assert checkpoints(fleet) == []
        ctl(fleet, "checkpoint")
        fleet.wait_for(lambda: checkpoints(fleet) != [], 30, "the learner's checkpoint")

        before = fleet.status().latest_test  # far below the threshold: no test was asked for by the rule
        ctl(fleet, "evaluate", "--test")
        fleet.wait_for(lambda: fleet.status().latest_test is not None and fleet.status().latest_test != before, 120,
                       "the held-out test the operator asked for")
        assert fleet.status().control is not None and fleet.status().control.tests == 1

        out = ctl(fleet, "set", "collector.epsilon.end=0.5", "collector.epsilon.decay_env_steps=1")
        assert "collector.epsilon.end: 0.04 -> 0.5" in out and "not reproducible" in out
        fleet.wait_for(lambda: "exploration now" in (tmp_path / "collector-a.log").read_text(), 30,
                       "the collector to take up the new exploration")

        assert "stopped" in ctl(fleet, "stop", "--reason", "operator test done")
        fleet.wait_for(lambda: fleet.status().run_state == "stopped", 10, "the run to stop")
    finally:
        fleet.close()


def heartbeats(fleet: Fleet) -> float:
    """Heartbeats the coordinator has answered (200), from its Prometheus metrics."""
    found = re.search(r'rlfleet_http_request_duration_seconds_count\{method="POST",'
                      r'route="/v1/workers/\{worker_id\}/heartbeat",status="200"\} (\S+)',
                      fleet.http.get("/metrics").text)
    return float(found.group(1)) if found else 0.0


@pytest.mark.slow
def test_a_collector_held_by_the_rate_limiter_waits_in_long_polls_until_the_learner_samples(
        tmp_path: Path, data_dir: Path, tokens: dict[str, str]) -> None:
    """Held back (the normal state of a learner-bound run), a collector used to re-check twenty times a second;
    it waits in a heartbeat long poll that the learner's sample answers."""
    data = small_run_config().model_dump(mode="json")
    data["env"]["solve_threshold"] = 1000
    config_file = tmp_path / "run.yaml"
    config_file.write_text(dump_run_config(RunConfig.model_validate(data)))
    fleet = Fleet(tmp_path, data_dir, config_file, tokens)
    learner = httpx.Client(base_url=fleet.url, timeout=10, headers={"Authorization": f"Bearer {tokens['learner']}"})
    try:
        fleet.start_coordinator()
        fleet.start_worker("collector-a", "collector")
        # No learner: past min_transitions + tolerance_transitions (64 + 512) the rate limiter holds it back.
        fleet.wait_for(lambda: fleet.status().env_steps > 576, 60, "the collector to get ahead of the learner")
        time.sleep(1)  # a chunk in flight lands
        steps, beats = fleet.status().env_steps, heartbeats(fleet)
        time.sleep(3)
        assert fleet.status().env_steps == steps, "the collector collected while the rate limiter held it"
        assert heartbeats(fleet) - beats <= 10, "the held collector re-checked instead of waiting in a long poll"

        worker = learner.post("/v1/workers", json={"kind": "learner", "name": "test"}).json()["worker_id"]
        assert learner.post(f"/v1/workers/{worker}/claim").json()["task"] is not None
        # Collectors are held while (inserted - 64) * 8 - sampled > 8 * 512: with ~600 inserted, 1,024 samples
        # bring the ratio back within the tolerance.
        for _ in range(4):
            resp = learner.post("/v1/buffers/replay-0/sample",
                                json={"worker_id": worker, "batch_size": 32, "num_batches": 8})
            assert resp.status_code == 200, resp.text
        fleet.wait_for(lambda: fleet.status().env_steps > steps, 20, "the collector to collect again")
    finally:
        learner.close()
        fleet.close()
