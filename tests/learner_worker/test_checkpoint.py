"""Learner checkpoints in a store (the local one here): round trip, newest wins, pruning, fallback past damaged
files, no pickle."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from rlfleet.launcher.up import free_port
from rlfleet.learner_worker.algorithms.dqn import DQN
from rlfleet.learner_worker.checkpoint import Checkpoint, load_latest_checkpoint, save_checkpoint
from rlfleet.shared.algorithms.dqn import DQNParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.storage.protocol import StoreUnavailable
from rlfleet.shared.storage.s3 import S3Store
from tests.support.policies import EPSILON_GREEDY, flat_spaces
from tests.support.seaweed import SeaweedFS

torch.set_num_threads(1)


def ckpt(iteration: int, algo: dict | None = None) -> Checkpoint:
    return Checkpoint(iteration=iteration, policy_version=iteration // 10, transitions_trained=iteration * 64,
                      algo=algo if algo is not None else {"w": torch.full((2, 2), float(iteration)), "n": iteration})


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


class Payload:
    """An arbitrary Python object; unpickling it would run `open(marker, "w")`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_an_empty_store_gives_none(tmp_path: Path):
    assert load_latest_checkpoint(LocalStore(tmp_path / "nope")) is None
    assert load_latest_checkpoint(LocalStore(tmp_path)) is None


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")
def test_roundtrip_with_real_learner_state(tmp_path: Path):
    dqn = DQN(flat_spaces(4, 2), DQNParams(net=NetConfig(hidden=(8,))), EPSILON_GREEDY, seed=0)
    rng = np.random.default_rng(0)
    batch = {"obs": rng.normal(size=(8, 4)).astype(np.float32), "actions": rng.integers(0, 2, 8),
             "returns": np.ones(8, np.float32), "boot_obs": rng.normal(size=(8, 4)).astype(np.float32),
             "discount": np.full(8, 0.9, np.float32)}
    dqn.update(batch)
    path = save_checkpoint(LocalStore(tmp_path), Checkpoint(7, 2, 448, dqn.state()))
    assert path == "learner-0000000007.pt"
    loaded = load_latest_checkpoint(LocalStore(tmp_path))
    assert loaded is not None
    assert (loaded.iteration, loaded.policy_version, loaded.transitions_trained) == (7, 2, 448)
    restored = DQN(flat_spaces(4, 2), DQNParams(net=NetConfig(hidden=(8,))), EPSILON_GREEDY, seed=1)
    restored.load(loaded.algo)
    for key, value in dqn.nets.online.state_dict().items():
        assert torch.equal(restored.nets.online.state_dict()[key], value)
    assert restored.nets.updates == 1
    # the file itself holds no pickled objects
    raw = torch.load(tmp_path / path, weights_only=True)
    assert raw["iteration"] == 7


def test_no_temp_files_left(tmp_path: Path):
    save_checkpoint(LocalStore(tmp_path), ckpt(1))
    assert names(tmp_path) == ["learner-0000000001.pt"]


def test_newest_by_iteration_wins(tmp_path: Path):
    for iteration in (20, 300, 5):  # saved out of order: the highest iteration counts, not the last write
        save_checkpoint(LocalStore(tmp_path), ckpt(iteration), keep=10)
    loaded = load_latest_checkpoint(LocalStore(tmp_path))
    assert loaded is not None and loaded.iteration == 300
    assert torch.equal(loaded.algo["w"], torch.full((2, 2), 300.0))
    assert loaded.algo["n"] == 300


def test_keep_prunes_older(tmp_path: Path):
    for iteration in (1, 2, 10, 11, 100):
        save_checkpoint(LocalStore(tmp_path), ckpt(iteration), keep=3)
    assert names(tmp_path) == ["learner-0000000010.pt", "learner-0000000011.pt", "learner-0000000100.pt"]


def test_pruning_ignores_unrelated_files(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("keep me")
    for iteration in range(1, 6):
        save_checkpoint(LocalStore(tmp_path), ckpt(iteration), keep=2)
    assert names(tmp_path) == ["learner-0000000004.pt", "learner-0000000005.pt", "notes.txt"]


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "missing_keys"])
def test_corrupt_newest_falls_back_to_previous(tmp_path: Path, damage: str):
    save_checkpoint(LocalStore(tmp_path), ckpt(1))
    save_checkpoint(LocalStore(tmp_path), ckpt(2))
    newest = tmp_path / save_checkpoint(LocalStore(tmp_path), ckpt(3))
    data = newest.read_bytes()
    if damage == "truncated":
        newest.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        newest.write_bytes(b"\x00" * len(data))
    elif damage == "empty":
        newest.write_bytes(b"")
    else:
        buf = io.BytesIO()
        torch.save({"iteration": 3}, buf)
        newest.write_bytes(buf.getvalue())
    loaded = load_latest_checkpoint(LocalStore(tmp_path))
    assert loaded is not None and loaded.iteration == 2


def test_all_corrupt_gives_none(tmp_path: Path):
    for iteration in (1, 2):
        (tmp_path / save_checkpoint(LocalStore(tmp_path), ckpt(iteration))).write_bytes(b"broken")
    assert load_latest_checkpoint(LocalStore(tmp_path)) is None


def test_pickled_object_is_skipped_and_never_run(tmp_path: Path):
    save_checkpoint(LocalStore(tmp_path), ckpt(1))
    marker = tmp_path / "pwned"
    evil = {"iteration": 2, "policy_version": 0, "transitions_trained": 0, "algo": {"x": Payload(marker)}}
    torch.save(evil, tmp_path / "learner-0000000002.pt")
    # sanity check on the payload: with pickle allowed, loading it really runs code...
    probe = tmp_path / "probe"
    torch.save({"x": Payload(probe)}, tmp_path / "probe.pt")
    torch.load(tmp_path / "probe.pt", weights_only=False)
    assert probe.exists()
    # ...and weights_only refuses it
    with pytest.raises(pickle.UnpicklingError):
        torch.load(tmp_path / "learner-0000000002.pt", weights_only=True)
    assert not marker.exists()
    # ...but load_latest_checkpoint must skip it without running it
    loaded = load_latest_checkpoint(LocalStore(tmp_path))
    assert loaded is not None and loaded.iteration == 1
    assert not marker.exists()


class Anything:
    pass


def test_pickled_object_alone_gives_none(tmp_path: Path):
    torch.save({"iteration": 9, "policy_version": 0, "transitions_trained": 0, "algo": Anything},
               tmp_path / "learner-0000000009.pt")
    assert load_latest_checkpoint(LocalStore(tmp_path)) is None


def test_observation_statistics_travel_with_the_checkpoint(tmp_path: Path):
    stats = {"count": 3, "mean": [1.0, 2.0], "m2": [0.5, 0.25]}
    save_checkpoint(LocalStore(tmp_path), Checkpoint(5, 2, 64, {"w": torch.zeros(1)}, obs_stats=stats))
    loaded = load_latest_checkpoint(LocalStore(tmp_path))
    assert loaded is not None and loaded.obs_stats == stats
    save_checkpoint(LocalStore(tmp_path), Checkpoint(6, 2, 64, {"w": torch.zeros(1)}))
    assert load_latest_checkpoint(LocalStore(tmp_path)).obs_stats is None  # type: ignore[union-attr]


def test_checkpoints_prune_and_resume_through_an_object_store(s3_env: SeaweedFS):
    """The learner's checkpoints in S3 (RLFLEET_STORE_URL): a learner restarted on another host resumes."""
    store = S3Store(s3_env.shared_bucket, "ckpt-test/checkpoints", s3_env.endpoint)
    for iteration in (1, 2, 10, 11):
        save_checkpoint(store, ckpt(iteration), keep=2)
    assert store.list_prefix("") == ["learner-0000000010.pt", "learner-0000000011.pt"]
    store.put("learner-0000000011.pt", b"torn")  # the newest unreadable: the one before it is used
    loaded = load_latest_checkpoint(S3Store(s3_env.shared_bucket, "ckpt-test/checkpoints", s3_env.endpoint))
    assert loaded is not None and loaded.iteration == 10
    assert torch.equal(loaded.algo["w"], torch.full((2, 2), 10.0))


def test_an_unreachable_store_is_not_mistaken_for_having_no_checkpoint(s3_env: SeaweedFS):
    """Starting from scratch would throw the run's training away: the learner ends (status 2) and is restarted."""
    dead = S3Store(s3_env.shared_bucket, "ckpt-test/checkpoints", f"http://127.0.0.1:{free_port()}",
                   retry_seconds=0.3)
    with pytest.raises(StoreUnavailable, match="RLFLEET_S3_ENDPOINT_URL"):
        load_latest_checkpoint(dead)
