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
    env = subject.config.env
    spaces = spaces_of(env)
    actor = subject.actor
    manifest = actor.manifest
    cap = env.max_episode_steps or _registered_limit(env.id) or MAX_EPISODE_STEPS
    rollout = Rollout(env, 1, spaces, Behaviour(head=manifest.head, sample=plan.stochastic), plan.seed,
                      greedy=not plan.stochastic)
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
    manifest_sha = hashlib.sha256(manifest.model_dump_json().encode()).hexdigest()
    return write_dataset(store, plan.name, env.id, spaces, episodes, valid_fraction=plan.valid_fraction,
                         seed=plan.seed, source_policy=str(subject.policy_path), source_manifest_sha256=manifest_sha,
                         stochastic=plan.stochastic)


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
                   data_dir: Path) -> int:
    """`rlfleet record`: the policy and config from RUN_DIR (or given), the dataset into DATA_DIR's dataset store
    (or RLFLEET_STORE_URL's); 2 with one line on stderr for input that cannot be recorded."""
    try:
        if not plan.name:
            raise UsageError("--name is required: the dataset's name, as a run's algo.dataset will give it")
        target = StoreSettings().store_target()
        policy_file, config_file, _ = resolve_inputs(run_dir, policy, config, None, target)
        subject = load_subject(policy_file, config_file)
        store = open_datasets(data_dir.resolve(), target)
        typer.echo(f"recording {plan.episodes} {'sampled' if plan.stochastic else 'greedy'} episodes of "
                   f"{policy_file} in {subject.config.env.id} as dataset {plan.name!r}")
        manifest = record(subject, plan, store, lambda i, ret, length: typer.echo(
            f"  episode {i}/{plan.episodes}: return {ret:.1f}, {length} steps"))
    except (UsageError, DatasetError, ValueError, OSError, StoreConfigError, StoreUnavailable) as exc:
        typer.echo(f"rlfleet record: {' '.join(str(exc).split())}", err=True)
        return 2
    train, valid = manifest.splits["train"], manifest.splits["valid"]
    typer.echo(f"dataset {plan.name!r} in {store.describe()}: {train.episodes} train episodes ({train.transitions} "
               f"transitions), {valid.episodes} valid ({valid.transitions}); {returns_text(manifest)}")
    return 0
