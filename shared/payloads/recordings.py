"""Recorded datasets: whole episodes as chunk payloads, split into train and valid, with a manifest.

A dataset lives in the data directory's dataset store (`rlfleet.shared.storage.factory.open_datasets`:
`data/datasets/`, or the bucket prefix's `datasets/`), beside the runs and outside every run's own stores: a run's
replay eviction and orphan sweep act on that run's store only, so they cannot reach a dataset, and any number of
runs can train from one recording. A dataset is written once (`rlfleet record`) and only read afterwards.

Layout: `<name>/train/episode-NNNNNN.msgpack`, `<name>/valid/...`, one episode per file in the chunk format
collectors write (rows = steps of one env), and `<name>/manifest.json`, written last, so a reader that finds a
manifest finds every file it names, each checked against its sha256 on load. Episodes are split whole: the
steps of one episode are correlated, and splitting inside one would leak the valid split into training.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import Field, ValidationError

from rlfleet.shared.config.base import Strict
from rlfleet.shared.payloads.codec import decode_chunk, encode_chunk
from rlfleet.shared.payloads.framestack import flat_columns
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.storage.protocol import PayloadStore

FORMAT_VERSION = 1
SPLITS = ("train", "valid")
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
_NAME = re.compile(NAME_PATTERN)


class DatasetError(ValueError):
    """A dataset cannot be written or used as asked; the message says what to change."""


class SplitInfo(Strict):
    episodes: int = Field(ge=1, description="whole episodes in the split")
    transitions: int = Field(ge=1, description="valid transitions in the split")
    returns: list[float] = Field(description="raw environment return of each episode, in file order")
    files: list[str] = Field(description="store paths of the split's files, one episode each")
    rows: list[int] = Field(description="rows of each file (its episode's steps)")
    sha256: list[str] = Field(description="sha256 of each file, checked on load")


class DatasetManifest(Strict):
    format_version: int = Field(description="the dataset format; a reader refuses any other")
    name: str = Field(description="the dataset's name, also its directory in the dataset store")
    env_id: str = Field(description="the environment the episodes were played in")
    spaces: Spaces = Field(description="its observation and action spaces")
    source_policy: str = Field(description="the policy file that played the episodes; minari:<dataset id> for a "
                                           "dataset imported from Minari")
    source_manifest_sha256: str = Field(description="sha256 of that policy's manifest (its spaces, net and head); "
                                                    "of the Minari dataset's metadata for an imported one")
    stochastic: bool | None = Field(description="actions sampled from the policy (true) or its greedy choice "
                                                "(false); null: not known (an imported dataset)")
    splits: dict[str, SplitInfo] = Field(description="train and valid")


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise DatasetError(f"dataset name {name!r}: 1-64 characters of [A-Za-z0-9_.-], starting with a letter or "
                           "digit")
    return name


def manifest_path(name: str) -> str:
    return f"{check_name(name)}/manifest.json"


def split_episodes(n_episodes: int, valid_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Episode indices shuffled and cut into (train, valid); a split left with no episode is refused."""
    if not 0.0 < valid_fraction < 1.0:
        raise DatasetError(f"valid fraction {valid_fraction}: must be strictly between 0 and 1")
    n_valid = round(n_episodes * valid_fraction)
    if n_valid == 0 or n_valid == n_episodes:
        empty = "valid" if n_valid == 0 else "train"
        raise DatasetError(f"a valid fraction of {valid_fraction} of {n_episodes} episodes leaves the {empty} "
                           "split with zero episodes: record more episodes or change the valid fraction")
    order = np.random.default_rng(seed).permutation(n_episodes).tolist()
    return sorted(order[n_valid:]), sorted(order[:n_valid])


def write_dataset(store: PayloadStore, name: str, env_id: str, spaces: Spaces,
                  episodes: Sequence[tuple[Mapping[str, np.ndarray], float]], *, valid_fraction: float, seed: int,
                  source_policy: str, source_manifest_sha256: str, stochastic: bool | None) -> DatasetManifest:
    """Write one file per (chunk arrays, raw return) episode, then the manifest."""
    check_name(name)
    if store.size(manifest_path(name)) is not None:
        raise DatasetError(f"dataset {name!r} already exists: datasets are written once, choose another name")
    train, valid = split_episodes(len(episodes), valid_fraction, seed)
    splits = {}
    for split, indices in zip(SPLITS, (train, valid), strict=True):
        files, rows, hashes, returns = [], [], [], []
        for i in indices:
            arrays, ret = episodes[i]
            data = encode_chunk(arrays, {"dataset": name, "split": split, "episode": i})
            path = f"{name}/{split}/episode-{i:06d}.msgpack"
            hashes.append(store.put(path, data))
            files.append(path)
            rows.append(int(np.asarray(arrays["rewards"]).size))
            returns.append(float(ret))
        splits[split] = SplitInfo(episodes=len(indices), transitions=sum(rows), returns=returns, files=files,
                                  rows=rows, sha256=hashes)
    manifest = DatasetManifest(format_version=FORMAT_VERSION, name=name, env_id=env_id, spaces=spaces,
                               source_policy=source_policy, source_manifest_sha256=source_manifest_sha256,
                               stochastic=stochastic, splits=splits)
    store.put(manifest_path(name), manifest.model_dump_json(indent=1).encode())
    return manifest


def load_manifest(store: PayloadStore, name: str) -> DatasetManifest:
    path = manifest_path(name)
    try:
        raw = store.get(path)
    except FileNotFoundError:
        raise DatasetError(f"dataset {name!r} not found ({path} in the dataset store): record it first with "
                           "`rlfleet record`") from None
    try:
        doc = json.loads(raw)
        version = doc.get("format_version") if isinstance(doc, dict) else None
        if version != FORMAT_VERSION:
            raise DatasetError(f"dataset {name!r} has format version {version}; this rlfleet reads {FORMAT_VERSION}")
        return DatasetManifest.model_validate(doc)
    except (ValueError, ValidationError) as exc:
        if isinstance(exc, DatasetError):
            raise
        raise DatasetError(f"dataset {name!r}: unreadable manifest ({exc})") from None


def check_usable(manifest: DatasetManifest, spaces: Spaces) -> None:
    """Refuse a dataset recorded in an env of other spaces than the run's, or with an empty split."""
    if manifest.spaces != spaces:
        raise DatasetError(f"dataset {manifest.name!r} was recorded with spaces {manifest.spaces.model_dump()}; "
                           f"this run's env has {spaces.model_dump()}")
    for split in SPLITS:
        info = manifest.splits.get(split)
        if info is None or info.episodes == 0:
            raise DatasetError(f"dataset {manifest.name!r}: the {split} split has zero episodes")


def load_split(store: PayloadStore, manifest: DatasetManifest, split: str) -> dict[str, np.ndarray]:
    """Every valid row of a split, columns flattened to (rows, ...) and concatenated (sha256-checked)."""
    info = manifest.splits[split]
    parts: dict[str, list[np.ndarray]] = {}
    for path, digest in zip(info.files, info.sha256, strict=True):
        arrays = flat_columns(decode_chunk(store.get(path, sha256=digest))[0])
        valid = np.asarray(arrays["valid"], bool).reshape(-1)
        for key, arr in arrays.items():
            flat = np.asarray(arr).reshape(valid.size, *np.asarray(arr).shape[2:])
            parts.setdefault(key, []).append(flat[valid])
    return {key: np.concatenate(arrs) for key, arrs in parts.items()}
