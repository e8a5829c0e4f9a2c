"""`rlfleet record`: play a trained policy for N episodes and keep them as a named dataset.

The episodes are stepped by the collectors' own rollout (collector_worker/rollout.py) with one env, one episode
per chunk, so a dataset holds exactly the columns a collector writes (`rewards` as trained on, after any reward
wrapper; the manifest keeps each episode's raw return). Recording runs in this process rather than through a
run's collectors: a recording needs no learner, no coordinator and no budget, only the policy and its env, and
it must be reproducible from `--seed` alone. The policy acts greedily unless `--stochastic`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import typer

from rlfleet.collector_worker.rollout import Rollout
from rlfleet.evaluator.testing import Subject, UsageError, load_subject, resolve_inputs
from rlfleet.shared.config.envcheck import spaces_of
from rlfleet.shared.extras import MissingExtra
from rlfleet.shared.payloads.recordings import DatasetError, DatasetManifest, check_name, split_episodes, write_dataset
from rlfleet.shared.policy.manifest import Behaviour
from rlfleet.shared.storage.factory import StoreConfigError, StoreSettings, open_datasets
from rlfleet.shared.storage.protocol import PayloadStore, StoreUnavailable

MAX_EPISODE_STEPS = 100_000  # an env without a time limit must say how long an episode may be


@dataclass(frozen=True)
class Recording:
    name: str
    episodes: int
    valid_fraction: float
    seed: int
    stochastic: bool


def record(subject: Subject, plan: Recording, store: PayloadStore,
           progress: Callable[[int, float, int], None]) -> DatasetManifest:
    """Play `plan.episodes` episodes of `subject`'s policy in its config's env and write the dataset."""
    check_name(plan.name)
    split_episodes(plan.episodes, plan.valid_fraction, plan.seed)  # refuse an empty split before playing
    episodes = play(subject, plan, progress)
    manifest_sha = hashlib.sha256(subject.actor.manifest.model_dump_json().encode()).hexdigest()
    return write_dataset(store, plan.name, subject.config.env.id, spaces_of(subject.config.env), episodes,
                         valid_fraction=plan.valid_fraction, seed=plan.seed, source_policy=str(subject.policy_path),
                         source_manifest_sha256=manifest_sha, stochastic=plan.stochastic)


def play(subject: Subject, plan: Recording,
         progress: Callable[[int, float, int], None]) -> list[tuple[dict[str, np.ndarray], float]]:
    """`plan.episodes` episodes of `subject`'s policy in its config's env: each one's chunk columns and return."""
    env = subject.config.env
    actor = subject.actor
    cap = env.max_episode_steps or _registered_limit(env.id) or MAX_EPISODE_STEPS
    rollout = Rollout(env, 1, spaces_of(env), Behaviour(head=actor.manifest.head, sample=plan.stochastic),
                      plan.seed, greedy=not plan.stochastic)
    rollout.actor = actor
    episodes = []
    try:
        for i in range(plan.episodes):
            chunk = rollout.collect(cap, episodes_target=1)
            if not chunk.episodes:
                raise ValueError(f"episode {i + 1} did not end within {cap} steps (or the env failed): set "
                                 "env.max_episode_steps in the run config")
            ret, length, _ = chunk.episodes[0]
            episodes.append((chunk.arrays, ret))
            progress(i + 1, ret, length)
    finally:
        rollout.close()
    return episodes


def _registered_limit(env_id: str) -> int | None:
    """The time limit gymnasium registers for `env_id` (CartPole-v1: 500), if any."""
    import gymnasium as gym

    try:
        return gym.spec(env_id).max_episode_steps
    except gym.error.Error:
        return None


def returns_text(manifest: DatasetManifest) -> str:
    returns = np.array(manifest.splits["train"].returns + manifest.splits["valid"].returns)
    return f"return {returns.mean():.1f} ± {returns.std():.1f} (min {returns.min():.1f}, max {returns.max():.1f})"


def record_command(run_dir: Path | None, policy: Path | None, config: Path | None, plan: Recording,
                   data_dir: Path, format_: str = "rlfleet") -> int:
    """`rlfleet record`: the policy and config from RUN_DIR (or given), the dataset into DATA_DIR's dataset store
    (or RLFLEET_STORE_URL's), or with `format_` minari into the local Minari store as dataset id `plan.name`
    (launcher/minari_datasets.py); 2 with one line on stderr for input that cannot be recorded."""
    try:
        if not plan.name:
            raise UsageError("--name is required: the dataset's name, as a run's algo.dataset will give it (with "
                             "--format minari: a Minari dataset id, namespace/name-v0)")
        if format_ == "minari":
            from rlfleet.launcher.minari_datasets import check_minari_id

            check_minari_id(plan.name)  # before anything is played
        target = StoreSettings().store_target()
        policy_file, config_file, _ = resolve_inputs(run_dir, policy, config, None, target)
        subject = load_subject(policy_file, config_file)
        kind = "sampled" if plan.stochastic else "greedy"
        typer.echo(f"recording {plan.episodes} {kind} episodes of {policy_file} in {subject.config.env.id} as "
                   f"{'Minari ' if format_ == 'minari' else ''}dataset {plan.name!r}")

        def progress(i: int, ret: float, length: int) -> None:
            typer.echo(f"  episode {i}/{plan.episodes}: return {ret:.1f}, {length} steps")

        if format_ == "minari":
            return _record_minari(subject, plan, policy_file, progress)
        store = open_datasets(data_dir.resolve(), target)
        manifest = record(subject, plan, store, progress)
    except (UsageError, DatasetError, ValueError, OSError, StoreConfigError, StoreUnavailable, MissingExtra) as exc:
        typer.echo(f"rlfleet record: {' '.join(str(exc).split())}", err=True)
        return 2
    train, valid = manifest.splits["train"], manifest.splits["valid"]
    typer.echo(f"dataset {plan.name!r} in {store.describe()}: {train.episodes} train episodes ({train.transitions} "
               f"transitions), {valid.episodes} valid ({valid.transitions}); {returns_text(manifest)}")
    return 0


def _record_minari(subject: Subject, plan: Recording, policy_file: object,
                   progress: Callable[[int, float, int], None]) -> int:
    from rlfleet.launcher.minari_datasets import write_minari

    episodes = play(subject, plan, progress)
    dataset = write_minari(plan.name, subject.config.env, episodes, (
        f"{plan.episodes} {'sampled' if plan.stochastic else 'greedy'} episodes of {policy_file} in "
        f"{subject.config.env.id}, recorded by rlfleet (seed {plan.seed})"))
    returns = np.array([ret for _, ret in episodes])
    typer.echo(f"Minari dataset {plan.name!r} in {dataset.storage.data_path}: {dataset.total_episodes} episodes "
               f"({dataset.total_steps} steps); return {returns.mean():.1f} ± {returns.std():.1f}")
    return 0
