"""Datasets: whole-episode splits, a manifest naming every file, sha256-checked reads, and refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlfleet.shared.payloads.recordings import (
    FORMAT_VERSION,
    DatasetError,
    check_usable,
    load_manifest,
    load_split,
    manifest_path,
    split_episodes,
)
from rlfleet.shared.storage.factory import open_datasets
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.storage.protocol import IntegrityError
from tests.support.datasets import write_demo_dataset
from tests.support.policies import CARTPOLE, PENDULUM


def test_the_manifest_names_whole_episodes_per_split(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    write_demo_dataset(store)
    manifest = load_manifest(store, "demo")
    train, valid = manifest.splits["train"], manifest.splits["valid"]
    assert (train.episodes, valid.episodes) == (3, 2)
    assert sorted(train.returns + valid.returns) == [10.0, 11.0, 12.0, 13.0, 14.0]
    assert sorted(train.rows + valid.rows) == [10, 11, 12, 13, 14] and train.transitions == sum(train.rows)
    assert all(f.startswith("demo/train/") for f in train.files) and len(train.sha256) == 3
    assert manifest.env_id == "CartPole-v1" and manifest.spaces == CARTPOLE and not manifest.stochastic


def test_load_split_keeps_valid_rows_of_every_episode_flattened(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    manifest = write_demo_dataset(store)
    valid = manifest.splits["valid"]
    columns = load_split(store, manifest, "valid")
    odd = sum(1 for rows in valid.rows if rows % 2)
    assert columns["obs"].shape == (valid.transitions - odd, 4) and columns["actions"].shape == (len(columns["obs"]),)
    assert columns["valid"].all()
    firsts = {int(first) // 1000 for first in columns["obs"][:, 0]}
    assert firsts == {int(f.split("-")[-1].split(".")[0]) for f in valid.files}  # whole episodes, none of train


def test_a_changed_file_is_refused_on_load(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    manifest = write_demo_dataset(store)
    path = tmp_path / manifest.splits["train"].files[0]
    raw = path.read_bytes()
    path.write_bytes(raw[:-1] + bytes([raw[-1] ^ 0xFF]))
    with pytest.raises(IntegrityError):
        load_split(store, manifest, "train")


def test_splits_are_disjoint_and_an_empty_split_is_refused() -> None:
    train, valid = split_episodes(20, 0.25, seed=3)
    assert len(valid) == 5 and not set(train) & set(valid) and sorted(train + valid) == list(range(20))
    with pytest.raises(DatasetError, match="valid split with zero episodes"):
        split_episodes(3, 0.1, seed=0)
    with pytest.raises(DatasetError, match="train split with zero episodes"):
        split_episodes(2, 0.9, seed=0)
    with pytest.raises(DatasetError, match="strictly between 0 and 1"):
        split_episodes(10, 1.0, seed=0)


def test_refusals_name_what_is_wrong(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    manifest = write_demo_dataset(store)
    with pytest.raises(DatasetError, match="recorded with spaces"):
        check_usable(manifest, PENDULUM)
    check_usable(manifest, CARTPOLE)
    with pytest.raises(DatasetError, match="not found.*rlfleet record"):
        load_manifest(store, "nope")
    with pytest.raises(DatasetError, match="already exists"):
        write_demo_dataset(store)
    with pytest.raises(DatasetError, match="dataset name"):
        write_demo_dataset(store, name="../escape")


def test_a_manifest_of_another_format_is_refused(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    write_demo_dataset(store)
    doc = json.loads((tmp_path / manifest_path("demo")).read_text())
    (tmp_path / manifest_path("demo")).write_text(json.dumps(doc | {"format_version": FORMAT_VERSION + 1}))
    with pytest.raises(DatasetError, match="format version"):
        load_manifest(store, "demo")
    (tmp_path / manifest_path("demo")).write_text("{not json")
    with pytest.raises(DatasetError, match="unreadable manifest"):
        load_manifest(store, "demo")


def test_the_dataset_store_is_beside_the_runs(tmp_path: Path) -> None:
    store = open_datasets(tmp_path, None)
    assert isinstance(store, LocalStore) and store.resolve("x") == tmp_path / "datasets" / "x"


def test_a_recording_of_a_frame_stacked_run_is_stored_compact_and_read_as_stacks(tmp_path: Path) -> None:
    """`rlfleet record` writes the collector's chunks as they are: compact for frame-stacked images. Reading a
    split rebuilds the stacks, so a dataset learner sees the flat columns."""
    import numpy as np

    from rlfleet.shared.payloads.codec import decode_chunk
    from rlfleet.shared.payloads.recordings import write_dataset
    from tests.support.frames import twin_rollouts

    compact, flat = twin_rollouts(3, num_envs=1, max_steps=6)
    try:
        episodes = [(compact.collect(20, episodes_target=1, random=True).arrays, 1.0) for _ in range(3)]
        expected = [flat.collect(20, episodes_target=1, random=True).arrays for _ in range(3)]
    finally:
        compact.close()
        flat.close()
    store = LocalStore(tmp_path)
    manifest = write_dataset(store, "pixels", "frames", compact.spaces, episodes, valid_fraction=0.34, seed=0,
                             source_policy="p", source_manifest_sha256="0" * 64, stochastic=False)
    assert "frame" in decode_chunk(store.get(manifest.splits["train"].files[0]))[0]
    train = load_split(store, manifest, "train")
    indices = sorted(int(f.rsplit("-", 1)[1].split(".")[0]) for f in manifest.splits["train"].files)
    for name in ("obs", "next_obs", "actions"):
        want = np.concatenate([expected[i][name].reshape(-1, *expected[i][name].shape[2:]) for i in indices])
        np.testing.assert_array_equal(train[name], want, err_msg=name)
