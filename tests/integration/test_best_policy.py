"""best/ never goes backwards: a restarted evaluator starts from the score stored with best/, not from -inf, and
only when that score does not describe the policy there from the coordinator's best validation."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlfleet.shared.config.run_config import RunConfig
from tests.support.fleet import Fleet


@pytest.fixture
def fleet(tmp_path: Path, data_dir: Path, config_file: Path, tokens: dict[str, str],
          run_config: RunConfig) -> Iterator[Fleet]:
    f = Fleet(tmp_path, data_dir, config_file, tokens, {"RLFLEET_LEASE_SECONDS": "2", "RLFLEET_RUN": run_config.name})
    try:
        yield f
    finally:
        f.close()


def restart_evaluator(fleet: Fleet, name: str) -> None:
    """Start evaluator `name` and wait until it has validated a version newer than any validated before."""
    before = fleet.status().latest_evaluation
    done = 0 if before is None else before.policy_version
    fleet.start_worker(name, "evaluator")

    def validated_again() -> bool:
        latest = fleet.status().latest_evaluation
        return latest is not None and latest.policy_version > done

    fleet.wait_for(validated_again, 120, f"{name} to validate a version newer than v{done}")


def test_a_restarted_evaluator_keeps_a_better_best_and_trusts_only_a_score_that_names_its_policy(
        fleet: Fleet, data_dir: Path, run_config: RunConfig, tmp_path: Path) -> None:
    best = data_dir / "runs" / run_config.name / "best"
    fleet.start_coordinator()
    fleet.start_worker("collector", "collector")
    fleet.start_worker("learner", "learner")
    fleet.start_worker("evaluator-1", "evaluator")
    fleet.wait_for(lambda: (best / "score.json").exists(), 120, "the first best/")
    fleet.kill("evaluator-1")
    policy = (best / "policy.safetensors").read_bytes()
    # best/ holds a policy validated far above anything this run reaches: a restart must not replace it. The
    # score names the policy there: the kill may have come between a better validation's two writes (seen in CI:
    # a policy newer than its score), and a score that does not name its policy is rightly not trusted.
    score = json.loads((best / "score.json").read_text())
    score["validation"]["mean"] = 10_000.0
    score["policy_sha256"] = hashlib.sha256(policy).hexdigest()
    (best / "score.json").write_text(json.dumps(score))
    restart_evaluator(fleet, "evaluator-2")
    assert json.loads((best / "score.json").read_text()) == score
    assert (best / "policy.safetensors").read_bytes() == policy

    fleet.kill("evaluator-2")
    # a score that names another policy (the evaluator stopped between writing the policy and its score) says
    # nothing of the one there: the coordinator's best validation, which no kept policy exceeds, is the bar
    (best / "score.json").write_text(json.dumps({**score, "policy_sha256": "0" * 64}))
    coordinator_best = fleet.status().best_evaluation
    assert coordinator_best is not None
    restart_evaluator(fleet, "evaluator-3")
    log = (tmp_path / "evaluator-3.log").read_text()
    assert f"starting from the run's best validation, {coordinator_best.mean:.3f}" in log
    kept = json.loads((best / "score.json").read_text())
    assert kept["validation"]["mean"] == 10_000.0 or kept["validation"]["mean"] > coordinator_best.mean
