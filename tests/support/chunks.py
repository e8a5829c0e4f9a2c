"""Chunk payloads encoded as a collector encodes them and written to a store, policy files beside them, and the
reports a worker would send for them: the coordinator reads, sizes and hashes what these write."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.payloads.codec import encode_chunk
from rlfleet.shared.storage.layout import chunk_path, policy_path
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import ChunkReport, EpisodeStat
from tests.support.configs import small_run_config


def chunk_arrays(steps: int, num_envs: int = 1, seed: int = 0) -> dict[str, np.ndarray]:
    """A CartPole-shaped chunk of `steps` vector steps of `num_envs` envs, as the collector's Rollout produces:
    arrays of shape (steps, num_envs, ...), so row t * num_envs + i is step t of env i."""
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.standard_normal((steps, num_envs, 4)).astype(np.float32),
        "actions": rng.integers(0, 2, (steps, num_envs)).astype(np.int64),
        "rewards": np.ones((steps, num_envs), dtype=np.float32),
        "terminated": np.zeros((steps, num_envs), dtype=bool),
        "truncated": np.zeros((steps, num_envs), dtype=bool),
        "next_obs": rng.standard_normal((steps, num_envs, 4)).astype(np.float32),
        "valid": np.ones((steps, num_envs), dtype=bool),
    }


def spread_ends(rows: int, count: int) -> list[int]:
    """`count` strictly ascending episode-end rows below `rows`, the last one at the chunk's last row."""
    assert count <= rows, (count, rows)
    return [rows * (i + 1) // count - 1 for i in range(count)]


def write_chunk(
    store: LocalStore, task_id: str, chunk_id: str, worker_id: str, *, steps: int | None = None, seed: int = 0,
    episodes: tuple[tuple[float, int], ...] = ((10.0, 10),), policy_version: int = 0,
    config: RunConfig | None = None,
) -> dict[str, Any]:
    """Encode a real payload, write it to the store and return a valid ChunkReport as a JSON dict.

    The chunk has the layout of `config` (the small test config by default): collector.num_envs envs of
    `steps` vector steps each (collector.chunk_steps by default; pass fewer only under sampling.n_episode),
    so env_steps = num_envs x steps rows, with one episode end per reported episode."""
    config = config or small_run_config()
    num_envs = config.collector.num_envs
    steps = config.collector.chunk_steps if steps is None else steps
    rows = steps * num_envs
    path = chunk_path(task_id, chunk_id)
    data = encode_chunk(chunk_arrays(steps, num_envs, seed), {"task_id": task_id, "chunk_id": chunk_id,
                                                             "policy_version": policy_version})
    sha = store.put(path, data)
    report = ChunkReport(
        chunk_id=chunk_id, worker_id=worker_id, task_id=task_id, payload_path=path, sha256=sha,
        size_bytes=len(data), env_steps=rows, num_envs=num_envs, ends=spread_ends(rows, len(episodes)),
        episodes=[EpisodeStat(ret=r, length=n) for r, n in episodes], policy_version=policy_version,
    )
    return report.model_dump(mode="json")


def write_policy(store: LocalStore, version: int, content: bytes | None = None) -> dict[str, Any]:
    """Write a (fake) policy file under policies/ and return its PolicyRef as a JSON dict."""
    path = policy_path(version)
    sha = store.put(path, content if content is not None else f"weights of v{version}".encode())
    return {"version": version, "path": path, "sha256": sha}
