"""examples/third_party_collector.py, written only against the published contract, feeds a real learner: a live
coordinator and learner (no rlfleet collector running) train on its chunks without a single payload error."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlfleet.shared.config.run_config import RunConfig, dump_run_config
from tests.support.configs import small_run_config
from tests.support.fleet import Fleet
from tests.support.repo import REPO

EXAMPLE = REPO / "examples" / "third_party_collector.py"
ALLOWED = {"argparse", "hashlib", "json", "logging", "os", "struct", "threading", "time", "uuid", "pathlib",
           "typing", "__future__", "gymnasium", "httpx", "msgpack", "numpy"}


def test_the_example_imports_nothing_of_rlfleet() -> None:
    tree = ast.parse(EXAMPLE.read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= ALLOWED, imported - ALLOWED


def _config(algo: str) -> RunConfig:
    """The suite's small DQN run, or the repository's synchronous PPO config (logp column, force_sync)."""
    if algo == "dqn":
        return small_run_config()
    return RunConfig.model_validate(yaml.safe_load((REPO / "configs" / "cartpole_ppo.yaml").read_text()))


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_a_learner_trains_on_the_third_party_collectors_chunks(algo: str, tmp_path: Path, data_dir: Path,
                                                               tokens: dict[str, str]) -> None:
    run_config = _config(algo)
    config_file = tmp_path / "run.yaml"
    config_file.write_text(dump_run_config(run_config))
    fleet = Fleet(tmp_path, data_dir, config_file, tokens, {"RLFLEET_RUN": run_config.name})  # its store path
    try:
        _train_with_the_example(fleet, run_config, data_dir, tokens, tmp_path)
    finally:
        fleet.close()


def _train_with_the_example(fleet: Fleet, run_config: RunConfig, data_dir: Path, tokens: dict[str, str],
                            tmp_path: Path) -> None:
    fleet.start_coordinator()
    fleet.start_worker("learner", "learner")
    log = open(tmp_path / "third-party.log", "wb")  # noqa: SIM115 - owned by the child process
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLFLEET_")}
    example = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--url", fleet.url, "--token", tokens["collector"],
         "--store", str(data_dir / "runs" / run_config.name / "store"), "--max-seconds", "300"],
        cwd=tmp_path, env={**env, "PYTHONUNBUFFERED": "1"}, stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL)
    fleet.procs["third-party"] = example

    def trained_on_a_policy_of_its_own_data() -> bool:
        st = fleet.status()
        return st.policy_version >= 3 and st.learner.transitions_trained > 0 and st.chunks >= 20

    fleet.wait_for(trained_on_a_policy_of_its_own_data, 240, "the learner to train on the example's chunks")
    st = fleet.status()
    assert sorted(w.kind for w in st.workers) == ["collector", "learner"]
    assert [w.name for w in st.workers if w.kind == "collector"] == ["third-party"]
    assert st.corrupt_chunks == 0 and st.duplicate_chunks == 0
    assert st.episodes > 0 and st.learner.iteration > 0
    output = (tmp_path / "third-party.log").read_text()
    assert "acting with policy v" in output  # it loaded a published policy
    print(f"third-party collector: {st.chunks} chunks, {st.env_steps} env steps, {st.episodes} episodes; learner: "
          f"{st.learner.iteration} updates, {st.learner.transitions_trained} transitions, policy v{st.policy_version}; "
          f"{output.count('paused by the rate limiter')} pauses, sampled policy lag max {st.policy_lag.sampled_max}")
    if run_config.sampling.force_sync:
        assert st.policy_lag.sampled_max == 0  # it waited for the policy trained on each chunk

    fleet.http.post("/v1/run/stop", json={"reason": "test over"}).raise_for_status()
    assert example.wait(timeout=60) == 0, fleet.logs()
    final = fleet.status()
    assert final.corrupt_chunks == 0
    assert final.env_steps == final.chunks * run_config.collector.num_envs * run_config.collector.chunk_steps
