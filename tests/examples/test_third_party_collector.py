"""examples/third_party_collector.py, written only against the published contract, feeds a real learner: a live
coordinator and learner (no rlfleet collector running) train on its chunks without a single payload error. For a
recurrent run its memory is rlfleet's: its GRU and LSTM steps are the numpy actor's, and every action it took was
rlfleet's actor's on the same observations from the same state, carried from chunk to chunk and reset where
episodes begin."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch
import yaml

from rlfleet.shared.config.base import CoreConfig
from rlfleet.shared.config.plan import RunPlan, chunk_schema
from rlfleet.shared.config.run_config import RunConfig, dump_run_config
from rlfleet.shared.payloads.codec import decode_chunk
from rlfleet.shared.policy.actors import build_actor
from rlfleet.shared.policy.files import decode_policy, policy_bytes, policy_path
from tests.support.configs import small_run_config
from tests.support.fleet import Fleet
from tests.support.policies import CARTPOLE, manifest, policy_state
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


def load_example() -> ModuleType:
    """The example as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("third_party_collector", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_the_examples_recurrent_core_steps_as_rlfleets_actor(kind: str) -> None:
    """Its cell, written from docs/protocol.md's equations, against the numpy actor's on one policy file."""
    m = manifest(CARTPOLE, "categorical", (16,)).model_copy(update={"core": CoreConfig(kind=kind, hidden=8)})
    state = policy_state(m, seed=1)
    theirs = load_example().Policy(policy_bytes({k: torch.from_numpy(v) for k, v in state.items()}, m))
    ours = build_actor(m, state)
    rng = np.random.default_rng(0)
    memory = np.zeros((3, *m.core.state_shape), np.float32)  # type: ignore[union-attr]
    for _ in range(20):
        obs = rng.normal(0.0, 2.0, (3, 4)).astype(np.float32)
        out, memory = theirs.forward(obs, memory)
        np.testing.assert_allclose(out, ours.forward(obs), atol=1e-5)
        expected = ours.core_state(3)
        assert expected is not None
        np.testing.assert_allclose(memory, expected, atol=1e-5)
    assert np.abs(memory).max() > 0.1  # a state that carries something


def _recurrent_config() -> RunConfig:
    """Recurrent PPO (LSTM core) on plain CartPole, which the example can step: one collector of 4 envs, a batch
    of one 128-row chunk per update, two epochs."""
    raw = yaml.safe_load((REPO / "configs" / "cartpole_novel_rppo.yaml").read_text())
    raw["name"] = "third-party-recurrent"
    del raw["env"]["wrappers"]
    raw["algo"]["net"] = {"hidden": [16], "activation": "tanh", "core": {"kind": "lstm", "hidden": 16}}
    raw["sampling"]["max_batch_size"] = 128
    raw["algo"].update(minibatch_size=128, epochs=2, report_every=1)  # quick updates, each one reported
    return RunConfig.model_validate(raw)


@pytest.mark.slow
def test_a_recurrent_runs_chunks_carry_the_examples_memory_as_rlfleets_actor_would(
        tmp_path: Path, data_dir: Path, tokens: dict[str, str]) -> None:
    """The example runs in this process against a live coordinator and learner; each payload it writes is kept as
    written, with the policy file it acted with. The learner trains on them with none corrupt, and replaying each
    chunk through rlfleet's own actor from the chunk's `core_state` (resetting where its rows end episodes) gives
    the log-probability the example recorded on every row, and ends in the state the example stored at the start
    of its next chunk."""
    run_config = _recurrent_config()
    config_file = tmp_path / "run.yaml"
    config_file.write_text(dump_run_config(run_config))
    fleet = Fleet(tmp_path, data_dir, config_file, tokens, {"RLFLEET_RUN": run_config.name})
    store = data_dir / "runs" / run_config.name / "store"
    example = load_example()
    written: list[tuple[bytes, bytes]] = []  # (chunk payload, the policy file that acted in it)

    class Keeping(example.Collector):  # type: ignore[name-defined,misc]
        def write(self, arrays: dict[str, np.ndarray], chunk_id: str) -> tuple[str, bytes]:
            path, data = super().write(arrays, chunk_id)
            written.append((data, (store / policy_path(self.version)).read_bytes()))
            return path, data

    session = None
    try:
        fleet.start_coordinator()
        fleet.start_worker("learner", "learner")
        session = example.Session(example.Coordinator(fleet.url, tokens["collector"]), "third-party")
        task = example.claim(session)
        assert task is not None and task["behaviour"]["core"] == {"kind": "lstm", "hidden": 16}
        collector = Keeping(session, store, task)
        acknowledged = 0
        while acknowledged < 6:
            acknowledged += collector.run_once()

        def trained_on_them() -> bool:  # v1 is the learner's initial policy; each later one trained on a chunk
            st = fleet.status()
            return st.policy_version >= 3 and st.learner.transitions_trained > 0

        fleet.wait_for(trained_on_them, 60, "the learner to train on the example's chunks")
        st = fleet.status()
        assert st.corrupt_chunks == 0 and st.duplicate_chunks == 0, st
    finally:
        if session is not None:
            session.stop.set()
        fleet.close()
    _replay_through_rlfleets_actor(run_config, written)


def _replay_through_rlfleets_actor(run_config: RunConfig, written: list[tuple[bytes, bytes]]) -> None:
    plan = RunPlan.of(run_config)
    schema = chunk_schema(plan.spaces, plan.behaviour, run_config.env)
    n = run_config.collector.num_envs
    carried = np.zeros((n, 2, 16), np.float32)  # every env begins an episode at the first chunk
    ends_then_more = carried_in = 0
    for data, policy in written:
        arrays, _ = decode_chunk(data)
        schema.check(arrays, n)  # what the learner checks before training on a payload
        schema.check_values(arrays, arrays["rewards"].size)
        np.testing.assert_allclose(arrays["core_state"], carried, atol=1e-4)
        carried_in += int((np.abs(arrays["core_state"]).max(axis=(1, 2)) > 0).sum())
        actor = build_actor(*decode_policy(policy))
        actor.load_core_state(arrays["core_state"])
        done = arrays["terminated"] | arrays["truncated"] | ~arrays["valid"]
        for t in range(len(done)):
            out = actor.forward(arrays["obs"][t]).astype(np.float64)
            logp = out - out.max(axis=1, keepdims=True)
            logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
            np.testing.assert_allclose(arrays["logp"][t], logp[np.arange(n), arrays["actions"][t]], atol=1e-4,
                                       err_msg=f"row {t}")
            actor.reset(done[t])
            ends_then_more += int(done[t].sum()) if t + 1 < len(done) else 0
        carried = actor.core_state(n)  # type: ignore[assignment]
    # the check saw memory both restart inside a chunk and carry over from one chunk to the next
    assert ends_then_more > 0 and carried_in > 0, (ends_then_more, carried_in)

