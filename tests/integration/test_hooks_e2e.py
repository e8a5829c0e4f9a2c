"""Learner hooks through `rlfleet up`: the run config names them, the coordinator and the launcher check that
they load, the learner calls them as it trains, and one that raises shows in the run's status and summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.hooks import LOG_VARIABLE
from tests.support.repo import REPO

RECORD, BOOM = "tests.support.hooks:record", "tests.support.hooks:boom"


@pytest.mark.slow
def test_hooks_see_the_run_and_a_failing_hook_shows_in_the_summary(tmp_path: Path) -> None:
    config = yaml.safe_load((REPO / "configs" / "cartpole_dqn.yaml").read_text())
    config["algo"].update(publish_every=20, report_every=10, net={"hidden": [64, 64]})
    # Collectors wait for the learner after ~2k steps (warm-up 1k + tolerance 1k): the rest of the budget takes
    # a few hundred updates, however slowly the learner starts.
    config["replay"].update(samples_per_insert=4, tolerance_transitions=1024)
    config["learner"] = {"hooks": [{"at": "start", "call": RECORD}, {"at": "every", "every": 10, "call": RECORD},
                                   {"at": "every", "every": 7, "call": BOOM}, {"at": "publish", "call": RECORD},
                                   {"at": "end", "call": RECORD}]}
    path, log = tmp_path / "hooks.yaml", tmp_path / "hooks.jsonl"
    path.write_text(yaml.safe_dump(config))
    # Small chunks and an unreachable threshold, as in test_up.py: the budget, not a lucky policy, ends the run.
    done = subprocess.run(
        [sys.executable, "-m", "rlfleet.launcher", "up", "--config", str(path), "--data-dir", str(tmp_path / "data"),
         "--port", "0", "--set", "budget.max_env_steps=4000", "--set", "collector.chunk_steps=16",
         "--set", "env.solve_threshold=1000"],
        cwd=REPO, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        env={**os.environ, LOG_VARIABLE: str(log)})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "data" / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_state"] == "budget_exhausted"

    views = [json.loads(line) for line in log.read_text().splitlines()]
    events = [v["event"] for v in views]
    assert events[0] == "start" and events[-1] == "end" and events.count("start") == events.count("end") == 1
    assert {(v["run_name"], v["algorithm"]) for v in views} == {(summary["run_name"], "dqn")}
    every = [v["iteration"] for v in views if v["event"] == "every"]
    assert every and every == list(range(10, 10 * len(every) + 1, 10))
    published = [v["policy_version"] for v in views if v["event"] == "publish"]
    assert published and published == list(range(1, len(published) + 1))
    end = views[-1]
    assert end["error"] is None and end["iteration"] >= summary["learner"]["iteration"] >= 10
    assert end["policy_version"] == summary["policy_version"] == published[-1]

    assert summary["learner"]["hooks_failed"] == {BOOM + "@every": "at iteration 7: ValueError: boom at every 7"}
    learner_log = (run_dir / "logs" / "learner.log").read_text()
    assert learner_log.count("learner hook tests.support.hooks:boom@every failed") == 1
    assert learner_log.count("ValueError: boom at every") == 1  # its traceback, once
