"""Small run configs for tests, and variations of one: fast to validate, quick to reach the sampling path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rlfleet.shared.config.run_config import RunConfig
from tests.support.repo import REPO


def shipped_configs() -> list[Any]:
    """configs/*.yaml as pytest params, each named by its file."""
    return [pytest.param(path, id=path.name) for path in sorted((REPO / "configs").glob("*.yaml"))]


def shipped(name: str) -> Path:
    return REPO / "configs" / name


def small_run_config() -> RunConfig:
    """A small, fast config: tiny replay warm-up so tests reach the sampling path quickly. Its threshold is set,
    as the run resolves CartPole-v1's default (shared/config/threshold.py), so it compares equal to what a run
    journals and hands out in tasks."""
    return RunConfig.model_validate({
        "name": "test-run",
        "env": {"solve_threshold": 475},
        "collector": {"num_envs": 2, "chunk_steps": 16},
        "replay": {"capacity_transitions": 2_000, "min_transitions": 64, "samples_per_insert": 8,
                   "tolerance_transitions": 512},
        "dqn": {"net": {"hidden": [32, 32]}, "batch_size": 32, "batches_per_request": 2, "publish_every": 20,
                "report_every": 10, "checkpoint_every": 50},
        "evaluation": {"episodes": 4, "num_envs": 2},
        "budget": {"max_env_steps": 1_000_000, "max_wall_seconds": 600},
    })


def make_config(base: RunConfig, **sections: dict[str, Any]) -> RunConfig:
    data = base.model_dump()
    for section, values in sections.items():
        data[section] = {**data[section], **values}
    return RunConfig.model_validate(data)


def layout(base: RunConfig, num_envs: int | None = None, chunk_steps: int | None = None,
           n_episode: int | None = None, **sections: dict[str, Any]) -> RunConfig:
    """`base` with collectors stepping `num_envs` envs into chunks of `chunk_steps` steps, so chunk reports
    of num_envs x chunk_steps rows are what the run expects. With `n_episode`, chunks are cut after that many
    episodes, so reports of fewer rows (whole steps, at most that many) are valid too."""
    collector = {"num_envs": num_envs or base.collector.num_envs,
                 "chunk_steps": chunk_steps or base.collector.chunk_steps}
    sampling = {**sections.pop("sampling", {}), **({"n_episode": n_episode} if n_episode else {})}
    return make_config(base, collector=collector, sampling=sampling, **sections)


def queue_config(base: RunConfig, sampler: str = "fifo", replay: dict[str, Any] | None = None,
                 **sampling: Any) -> RunConfig:
    """PPO-like: whole chunks from a queue, each served once, data at most the policy lag old."""
    sampling_values: dict[str, Any] = {"unit": "chunk", "min_batch_size": 32, "max_batch_size": 64,
                                       "force_sync": True}
    sampling_values.update(sampling)
    replay_values: dict[str, Any] = {"sampler": sampler, "max_use": 1, "min_transitions": 1,
                                     "tolerance_transitions": 10_000}
    replay_values.update(replay or {})
    data = base.model_dump()
    data["algo"] = "ppo"
    data["replay"] = {**data["replay"], **replay_values}
    data["sampling"] = {**data["sampling"], **sampling_values}
    return RunConfig.model_validate(data)
