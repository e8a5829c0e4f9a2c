"""force_sync through `rlfleet up` with a learner whose updates take longer than a collector used to wait for the
policy trained on its chunk (2 s): no chunk is collected with a policy about to be superseded, so none is discarded
as stale."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.hooks import SLOW_SECONDS
from tests.support.repo import REPO


@pytest.mark.slow
def test_collectors_wait_out_a_slow_update_and_nothing_is_discarded_as_stale(tmp_path: Path) -> None:
    """Measured on 2 cores: ~37 s. Before, every round whose update outlasted the 2-s wait sent chunks of the old
    policy that the new one made stale (removed_stale 8 in this run)."""
    config = yaml.safe_load((REPO / "configs" / "cartpole_a2c.yaml").read_text())
    # Every update is followed by SLOW_SECONDS in the learner before it takes the next batch: the collectors, which
    # hold the policy just published, wait that long for the next one.
    config["learner"] = {"hooks": [{"at": "every", "every": 1, "call": "tests.support.hooks:slow"}]}
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(config))
    rounds = 8
    done = subprocess.run(
        [sys.executable, "-m", "rlfleet.launcher", "up", "--config", str(path), "--data-dir", str(tmp_path / "data"),
         "--port", "0", "--set", f"budget.max_env_steps={rounds * 40}", "--set", "env.solve_threshold=1000"],
        cwd=REPO, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # the budget, not a solve, ends it
    (run_dir,) = (tmp_path / "data" / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_state"] == "budget_exhausted"
    (buffer,) = summary["buffers"]
    assert summary["learner"]["iteration"] >= rounds // 2, summary["learner"]
    assert buffer["removed_stale"] == 0, buffer
    assert summary["policy_lag"]["ingest_max"] == 0, summary["policy_lag"]
    logs = "".join(p.read_text() for p in (run_dir / "logs").glob("collector*.log"))
    assert "collecting again with" not in logs  # no wait ran into its bound
    assert SLOW_SECONDS > 2.0
