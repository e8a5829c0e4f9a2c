"""`rlfleet record`: a real policy played greedily into a dataset whose files are what a collector writes, and
input that cannot be recorded refused in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from rlfleet.shared.config.env import EnvConfig
from rlfleet.shared.config.plan import chunk_schema
from rlfleet.shared.payloads.codec import decode_chunk
from rlfleet.shared.payloads.recordings import load_manifest, load_split
from rlfleet.shared.payloads.schema import ChunkSchema
from rlfleet.shared.policy.manifest import Behaviour
from rlfleet.shared.storage.local import LocalStore
from tests.support.policies import CARTPOLE
from tests.support.repo import REPO
from tests.support.run_files import write_expert_inputs


def _record(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlfleet.launcher", "record", *args, "--data-dir", str(tmp_path / "data")],
                          cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_record_writes_a_dataset_of_collector_chunks(tmp_path: Path) -> None:
    policy, config = write_expert_inputs(tmp_path)
    done = _record(tmp_path, "--policy", str(policy), "--config", str(config), "--name", "expert", "--episodes", "5",
                   "--valid-fraction", "0.4")
    assert done.returncode == 0, done.stderr
    assert "episode 5/5: return 500.0, 500 steps" in done.stdout
    assert "3 train episodes (1500 transitions)" in done.stdout
    store = LocalStore(tmp_path / "data" / "datasets")
    manifest = load_manifest(store, "expert")
    assert manifest.spaces == CARTPOLE and not manifest.stochastic and manifest.source_policy == str(policy)
    assert manifest.splits["valid"].returns == [500.0, 500.0]
    schema: ChunkSchema = chunk_schema(CARTPOLE, Behaviour(head="categorical", sample=False), EnvConfig())
    arrays, _ = decode_chunk(store.get(manifest.splits["train"].files[0]))
    schema.check(arrays, 1)  # exactly the columns, dtypes and shapes a collector's chunk has
    train = load_split(store, manifest, "train")
    greedy = (train["obs"][:, 2] + 0.5 * train["obs"][:, 3] > 0).astype(np.int64)
    assert np.array_equal(train["actions"], greedy)  # played greedily: every action is the expert's choice


def test_record_refuses_what_it_cannot_record(tmp_path: Path) -> None:
    policy, config = write_expert_inputs(tmp_path)
    base = ["--policy", str(policy), "--config", str(config)]
    for args, hint in [
        ([*base, "--name", "x", "--episodes", "3", "--valid-fraction", "0.1"], "valid split with zero episodes"),
        ([*base, "--name", "../x"], "dataset name"),
        ([*base], "--name is required"),
        (["--name", "x"], "give RUN_DIR, or both --policy FILE and --config CONFIG"),
    ]:
        done = _record(tmp_path, *args)
        assert done.returncode == 2 and hint in done.stderr and done.stderr.startswith("rlfleet record:"), done.stderr
    assert _record(tmp_path, *base, "--name", "once", "--episodes", "2", "--valid-fraction", "0.5").returncode == 0
    again = _record(tmp_path, *base, "--name", "once", "--episodes", "2", "--valid-fraction", "0.5")
    assert again.returncode == 2 and "already exists" in again.stderr
