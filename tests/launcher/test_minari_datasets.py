"""Minari datasets in and out of the dataset store: a dataset made with Minari's own writer imports as the same
episodes (count, lengths, returns, actions, observations), split by whole episodes; exported back it is the
same Minari episodes; `rlfleet record --format minari` writes the policy's episodes; a dataset whose spaces do
not fit the config is refused naming both; and BC trains from an imported dataset to CartPole's threshold."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rlfleet.launcher.cli import app
from rlfleet.launcher.minari_datasets import stored_episodes
from rlfleet.shared.payloads.recordings import load_manifest
from rlfleet.shared.storage.local import LocalStore
from tests.support.minari_datasets import minari_dataset, play_cartpole
from tests.support.repo import REPO
from tests.support.run_files import write_expert_inputs

KINDS = ["balance", "random", "random", "balance", "random", "random", "random", "balance", "random", "random"]


@pytest.fixture(autouse=True)
def minari_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(home))
    return home


def rlfleet(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def test_an_import_holds_the_same_episodes_split_whole_and_exports_back_unchanged(tmp_path: Path) -> None:
    import minari

    played = play_cartpole(KINDS, seed=3)
    minari_dataset("tests/cartpole-mixed-v0", played)
    data = tmp_path / "data"
    code, output = rlfleet("dataset", "import", "tests/cartpole-mixed-v0", "--name", "mixed", "--config",
                           "cartpole_bc", "--data-dir", data)
    assert code == 0, output
    store = LocalStore(data / "datasets")
    manifest = load_manifest(store, "mixed")
    assert manifest.source_policy == "minari:tests/cartpole-mixed-v0" and manifest.stochastic is None
    assert manifest.splits["train"].episodes == 8 and manifest.splits["valid"].episodes == 2
    episodes = stored_episodes(store, manifest)
    assert len(episodes) == len(played)
    for (arrays, ret), original in zip(episodes, played, strict=True):
        steps = len(original["rewards"])
        assert arrays["actions"].shape == (steps, 1) and arrays["actions"].dtype == np.int64  # one file, whole
        assert ret == original["rewards"].sum() and np.array_equal(arrays["actions"][:, 0], original["actions"])
        assert np.array_equal(arrays["obs"][:, 0], original["observations"][:-1])
        assert np.array_equal(arrays["next_obs"][:, 0], original["observations"][1:])
        assert arrays["terminated"][-1, 0] == original["terminations"][-1] and arrays["valid"].all()
    lengths = sorted(manifest.splits["train"].rows + manifest.splits["valid"].rows)
    assert lengths == sorted(len(e["rewards"]) for e in played)
    assert sorted(manifest.splits["train"].returns + manifest.splits["valid"].returns) == sorted(
        float(e["rewards"].sum()) for e in played)

    code, output = rlfleet("dataset", "export", "mixed", "tests/cartpole-back-v0", "--config", "cartpole_bc",
                           "--data-dir", data)
    assert code == 0, output
    back = list(minari.load_dataset("tests/cartpole-back-v0").iterate_episodes())
    assert len(back) == len(played)
    for episode, original in zip(back, played, strict=True):
        for field in ("observations", "actions", "rewards", "terminations", "truncations"):
            assert np.array_equal(getattr(episode, field), original[field]), field


def test_a_dataset_of_other_spaces_is_refused_naming_both(tmp_path: Path) -> None:
    minari_dataset("tests/cartpole-v0", play_cartpole(["random", "random"], seed=0))
    code, output = rlfleet("dataset", "import", "tests/cartpole-v0", "--name", "p", "--config", "pendulum_ppo",
                           "--data-dir", tmp_path / "data")
    assert code == 2
    assert "observes Box([-4.8" in output and "acts in Discrete(2)" in output  # the dataset's
    assert "Pendulum-v1 observes Box([-1. -1. -8.]" in output and "acts in Box(-2.0, 2.0, (1,), float32)" in output
    assert not (tmp_path / "data" / "datasets" / "p").exists()


def test_a_missing_dataset_is_refused_without_a_download(tmp_path: Path, minari_home: Path) -> None:
    code, output = rlfleet("dataset", "import", "D4RL/door/human-v2", "--name", "d", "--config", "cartpole_bc",
                           "--data-dir", tmp_path / "data")
    assert code == 2 and "no Minari dataset 'D4RL/door/human-v2'" in output and "minari download" in output
    assert not (minari_home / "D4RL" / "door" / "human-v2").exists()


def test_record_writes_a_minari_dataset_of_the_policys_episodes(tmp_path: Path) -> None:
    import minari

    policy, config = write_expert_inputs(tmp_path)
    code, output = rlfleet("record", "--policy", policy, "--config", config, "--name", "tests/expert-v0",
                           "--episodes", "3", "--format", "minari")
    assert code == 0, output
    dataset = minari.load_dataset("tests/expert-v0")
    episodes = list(dataset.iterate_episodes())
    assert len(episodes) == 3 and [e.rewards.sum() for e in episodes] == [500.0] * 3  # the expert balances
    assert all(e.truncations[-1] and not e.terminations.any() and len(e.observations) == 501 for e in episodes)
    code, output = rlfleet("record", "--policy", policy, "--config", config, "--name", "tests/expert-v0",
                           "--episodes", "3", "--format", "minari")
    assert code == 2 and "already exists" in output and "episode 1/3" not in output  # refused before playing


@pytest.mark.slow
def test_bc_trains_from_an_imported_minari_dataset_to_the_threshold(tmp_path: Path) -> None:
    minari_dataset("tests/cartpole-expert-v0", play_cartpole(["balance"] * 20, seed=100))
    data = tmp_path / "data"
    imported = subprocess.run(
        [sys.executable, "-m", "rlfleet.launcher", "dataset", "import", "tests/cartpole-expert-v0", "--name",
         "cartpole-expert", "--config", "configs/cartpole_bc.yaml", "--data-dir", str(data)],
        cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)  # minari_home's path
    assert imported.returncode == 0, imported.stderr
    done = subprocess.run(
        [sys.executable, "-m", "rlfleet.launcher", "up", "--config", "configs/cartpole_bc.yaml", "--data-dir",
         str(data), "--port", "0"], cwd=REPO, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (data / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_state"] == "solved" and summary["confirmed_by"]["mean"] >= 475
    assert summary["dataset"]["name"] == "cartpole-expert" and summary["dataset"]["train_episodes"] == 16
