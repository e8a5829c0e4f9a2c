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

import numpy as np

from collector_worker.rollout import Rollout
from evaluator.testing import Subject
from shared.config.envcheck import spaces_of
from shared.payloads.recordings import DatasetManifest, check_name, split_episodes, write_dataset
from shared.policy.manifest import Behaviour
from shared.storage.protocol import PayloadStore

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
