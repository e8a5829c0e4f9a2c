"""Minari datasets in and out of rlfleet's dataset store: `rlfleet dataset import`, `rlfleet dataset export` and
`rlfleet record --format minari` (the `minari` extra).

Minari is the ecosystem's format for offline RL data (TorchRL and RLlib read it): one episode is T actions,
rewards, terminations and truncations and T + 1 observations. rlfleet's dataset store keeps one episode per
chunk file in the collectors' format (rows = steps; obs and next_obs side by side; shared/payloads/recordings.py)
with whole-episode train and valid splits. Importing converts each Minari episode to those columns and splits
by episode, never inside one; exporting puts every episode of a dataset (both splits, in recording order) back
into Minari's format through its own writer, `create_dataset_from_buffers`.

A dataset is only worth importing for a run whose env it fits: its observation and action spaces must equal
those of the config's env as the evaluator makes it (evaluation wrappers only), or it is refused naming both.
Observations are cast to the dtype the run's policy reads (spaces_of), actions to the collectors' (int64 for
discrete actions, float32 for continuous ones).

Sources are local: a path to a dataset's directory, or a dataset id under MINARI_DATASETS_PATH (Minari's
default ~/.minari/datasets). Nothing is downloaded (`minari download ID` does that, on purpose).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rlfleet.shared.config.envcheck import spaces_of
from rlfleet.shared.config.run_config import EnvConfig
from rlfleet.shared.envs.build import make_env
from rlfleet.shared.extras import require
from rlfleet.shared.payloads.codec import decode_chunk
from rlfleet.shared.payloads.recordings import SPLITS, DatasetError, DatasetManifest, write_dataset
from rlfleet.shared.payloads.spaces import DiscreteActions, Spaces
from rlfleet.shared.storage.protocol import PayloadStore

Episode = tuple[dict[str, np.ndarray], float]  # one episode's chunk columns (steps, 1, ...) and its return


def _minari() -> Any:
    return require("minari", "minari", "Minari datasets")


def open_minari(source: str) -> Any:
    """The Minari dataset at path `source` (its directory or its data/ folder), or of that id in the local
    Minari store; DatasetError naming where it looked."""
    minari = _minari()
    path = Path(source)
    if path.is_dir():
        data = path / "data" if (path / "data").is_dir() else path
        try:
            return minari.MinariDataset(data)
        except (OSError, ValueError, KeyError) as exc:
            raise DatasetError(f"{path} is not a readable Minari dataset ({exc}): give a dataset's directory (the "
                               "one holding data/) or its id") from None
    from minari.storage.datasets_root_dir import get_dataset_path

    try:
        return minari.load_dataset(source, download=False)
    except (FileNotFoundError, ValueError) as exc:
        raise DatasetError(f"no Minari dataset {source!r} at {get_dataset_path(source)} ({exc}): give a local "
                           "dataset's directory, or an id under MINARI_DATASETS_PATH (rlfleet downloads nothing: "
                           "`minari download ID` first)") from None


def env_spaces(env: EnvConfig) -> tuple[gym.Space, gym.Space]:
    """The observation and action spaces of `env` as the evaluator plays it."""
    made = make_env(env, training=False)
    try:
        return made.observation_space, made.action_space
    finally:
        made.close()


def check_fits(dataset: Any, env: EnvConfig) -> None:
    """Refuse a Minari dataset whose spaces differ from the env's, naming both."""
    observation, action = env_spaces(env)
    if dataset.observation_space != observation or dataset.action_space != action:
        raise DatasetError(
            f"Minari dataset {dataset.id!r} observes {dataset.observation_space} and acts in {dataset.action_space}; "
            f"the config's env {env.id} observes {observation} and acts in {action}: import it with a config of the "
            "env it was recorded in")


def episode_columns(episode: Any, spaces: Spaces) -> Episode:
    """A Minari episode as rlfleet chunk columns of one env, and its return."""
    observations = np.asarray(episode.observations, dtype=spaces.obs.dtype)
    steps = len(episode.rewards)
    if observations.shape[0] != steps + 1:
        raise DatasetError(f"Minari episode {episode.id} has {observations.shape[0]} observations for {steps} steps "
                           f"(Minari keeps steps + 1)")
    discrete = isinstance(spaces.action, DiscreteActions)
    actions = np.asarray(episode.actions, dtype=np.int64 if discrete else np.float32)
    rewards = np.asarray(episode.rewards, dtype=np.float32)
    column = (steps, 1)
    return {"obs": observations[:-1, None], "next_obs": observations[1:, None],
            "actions": actions.reshape(column + actions.shape[1:]), "rewards": rewards.reshape(column),
            "terminated": np.asarray(episode.terminations, bool).reshape(column),
            "truncated": np.asarray(episode.truncations, bool).reshape(column),
            "valid": np.ones(column, bool)}, float(rewards.sum(dtype=np.float64))


def import_minari(source: str, env: EnvConfig, store: PayloadStore, name: str, valid_fraction: float,
                  seed: int) -> DatasetManifest:
    """Read a local Minari dataset into the dataset store as `name`, split by whole episodes."""
    dataset = open_minari(source)
    check_fits(dataset, env)
    spaces = spaces_of(env)
    episodes = [episode_columns(e, spaces) for e in dataset.iterate_episodes()]
    metadata = json.dumps(dataset.storage.read_raw_metadata(dataset.storage.data_path), sort_keys=True)
    return write_dataset(store, name, env.id, spaces, episodes, valid_fraction=valid_fraction, seed=seed,
                         source_policy=f"minari:{dataset.id}",
                         source_manifest_sha256=hashlib.sha256(metadata.encode()).hexdigest(), stochastic=None)


def stored_episodes(store: PayloadStore, manifest: DatasetManifest) -> list[Episode]:
    """Every episode of an rlfleet dataset, both splits, in the order they were recorded (sha256-checked)."""
    found = []
    for split in SPLITS:
        info = manifest.splits[split]
        for path, digest, ret in zip(info.files, info.sha256, info.returns, strict=True):
            arrays, meta = decode_chunk(store.get(path, sha256=digest))
            found.append((int(meta["episode"]), arrays, ret))
    return [(arrays, ret) for _, arrays, ret in sorted(found, key=lambda e: e[0])]


def check_minari_id(dataset_id: str) -> None:
    """Refuse, before anything is played or written, an id Minari cannot take or already holds."""
    _minari()
    from minari.dataset.minari_dataset import parse_dataset_id
    from minari.storage.datasets_root_dir import get_dataset_path

    try:
        parse_dataset_id(dataset_id)
    except ValueError:
        raise DatasetError(f"Minari dataset id {dataset_id!r}: write it as (namespace/)name-vN, e.g. "
                           "rlfleet/cartpole-expert-v0") from None
    if get_dataset_path(dataset_id).exists():
        raise DatasetError(f"Minari dataset {dataset_id!r} already exists at {get_dataset_path(dataset_id)}: Minari "
                           "datasets are written once, choose another id or version")


def write_minari(dataset_id: str, env: EnvConfig, episodes: Sequence[Episode], description: str) -> Any:
    """Write episodes (chunk columns of one env) as a Minari dataset through Minari's own writer."""
    minari = _minari()
    from minari.data_collector import EpisodeBuffer

    check_minari_id(dataset_id)
    buffers = [EpisodeBuffer(id=i, **_minari_episode(arrays, i)) for i, (arrays, _) in enumerate(episodes)]
    observation, action = env_spaces(env)
    try:
        spec: Any = gym.spec(env.id) if not env.kwargs and not env.wrappers else None
    except gym.error.Error:
        spec = None  # an entry point's env: the dataset keeps its spaces, not a way to make it
    with warnings.catch_warnings():  # Minari asks for an author e-mail and an eval env, which rlfleet does not have
        warnings.simplefilter("ignore", UserWarning)
        return minari.create_dataset_from_buffers(
            dataset_id, buffers, env=spec, observation_space=observation, action_space=action,
            algorithm_name="rlfleet", author="rlfleet", description=description)


def _minari_episode(arrays: Mapping[str, np.ndarray], index: int) -> dict[str, np.ndarray]:
    """One env's chunk columns as Minari's episode fields (T + 1 observations)."""
    if "next_obs" not in arrays:
        raise DatasetError(f"episode {index} has no next_obs column: Minari needs the observation after the last "
                           "step")
    valid = np.asarray(arrays["valid"], bool).reshape(-1)
    if not valid.all():
        raise DatasetError(f"episode {index} has {int((~valid).sum())} rows an env error left invalid: Minari has "
                           "no way to mark them")
    obs, next_obs = np.asarray(arrays["obs"])[:, 0], np.asarray(arrays["next_obs"])[:, 0]
    return {"observations": np.concatenate([obs, next_obs[-1:]]), "actions": np.asarray(arrays["actions"])[:, 0],
            "rewards": np.asarray(arrays["rewards"], np.float64).reshape(-1),
            "terminations": np.asarray(arrays["terminated"], bool).reshape(-1),
            "truncations": np.asarray(arrays["truncated"], bool).reshape(-1)}


def import_command(source: str, config: Path, name: str, valid_fraction: float, seed: int, data_dir: Path) -> str:
    """`rlfleet dataset import`: the summary line; UserError for a source, config or name that cannot be used."""
    from rlfleet.launcher.configs import read_config
    from rlfleet.launcher.errors import UserError
    from rlfleet.shared.extras import MissingExtra
    from rlfleet.shared.storage.factory import StoreConfigError, StoreSettings, open_datasets
    from rlfleet.shared.storage.protocol import StoreUnavailable

    run_config = read_config(config, [])
    try:
        store = open_datasets(data_dir.resolve(), StoreSettings().store_target())
        manifest = import_minari(source, run_config.env, store, name, valid_fraction, seed)
    except (DatasetError, MissingExtra, OSError, StoreConfigError, StoreUnavailable) as exc:
        raise UserError(str(exc)) from exc
    train, valid = manifest.splits["train"], manifest.splits["valid"]
    return (f"dataset {name!r} in {store.describe()} from Minari {manifest.source_policy[len('minari:'):]}: "
            f"{train.episodes} train episodes ({train.transitions} transitions), {valid.episodes} valid "
            f"({valid.transitions}); train with algo.dataset: {name}")


def export_command(name: str, dataset_id: str, config: Path, data_dir: Path) -> str:
    """`rlfleet dataset export`: the summary line; UserError for a dataset or id that cannot be used."""
    from rlfleet.launcher.configs import read_config
    from rlfleet.launcher.errors import UserError
    from rlfleet.shared.extras import MissingExtra
    from rlfleet.shared.payloads.recordings import load_manifest
    from rlfleet.shared.storage.factory import StoreConfigError, StoreSettings, open_datasets
    from rlfleet.shared.storage.protocol import IntegrityError, StoreUnavailable

    env = read_config(config, []).env
    try:
        store = open_datasets(data_dir.resolve(), StoreSettings().store_target())
        manifest = load_manifest(store, name)
        if manifest.env_id != env.id or manifest.spaces != spaces_of(env):
            raise DatasetError(f"dataset {name!r} was recorded in {manifest.env_id} with spaces "
                               f"{manifest.spaces.model_dump()}; the config's env is {env.id} with "
                               f"{spaces_of(env).model_dump()}: give the config of the env it was recorded in")
        dataset = write_minari(dataset_id, env, stored_episodes(store, manifest),
                               f"rlfleet dataset {name!r} ({manifest.source_policy}), both splits")
    except (DatasetError, MissingExtra, OSError, StoreConfigError, StoreUnavailable, IntegrityError) as exc:
        raise UserError(str(exc)) from exc
    return (f"Minari dataset {dataset_id!r} in {dataset.storage.data_path}: {dataset.total_episodes} episodes "
            f"({dataset.total_steps} steps) from dataset {name!r}")
