"""Chunks whose rows say which chunk and offset they are, stored for real, and transition sample replies over
them: a learner's cache and prefetcher gathering the wrong row shows up as a wrong number, not a near miss."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlfleet.shared.payloads.codec import encode_chunk
from rlfleet.shared.payloads.schema import ChunkSchema
from rlfleet.shared.storage.layout import chunk_path
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import Directive, SampledChunk, SampleResponse
from tests.support.policies import flat_spaces

T, N, D = 8, 2, 3  # steps, envs and observation size of every chunk
GAMMA, NSTEP = 0.9, 3
SCHEMA = ChunkSchema.of(flat_spaces(D, 3), behaviour_logp=False)


def numbered_arrays(number: int) -> dict[str, np.ndarray]:
    """obs[t, i] = (number, t*N + i, 0.5): each flattened row names its chunk and its offset."""
    rng = np.random.default_rng(number)
    offsets = np.arange(T * N).reshape(T, N)
    obs = np.zeros((T, N, D), np.float32)
    obs[..., 0] = number
    obs[..., 1] = offsets
    obs[..., 2] = 0.5
    next_obs = obs + np.float32(100.0)
    terminated = rng.random((T, N)) < 0.15
    truncated = rng.random((T, N)) < 0.15
    return {"obs": obs, "actions": (offsets * 7 + number) % 3, "rewards": (offsets + 10 * number).astype(np.float32),
            "terminated": terminated, "truncated": truncated, "next_obs": next_obs, "valid": np.ones((T, N), bool)}


def transition_reply(**fields) -> SampleResponse:
    """A transition sample reply: every item one row, weight 1, ids in draw order."""
    k = len(fields["chunk_index"])
    return SampleResponse(unit="transition", lengths=[1] * k, ids=list(range(k)), weights=[1.0] * k, **fields)


class StoredChunks:
    """Chunks numbered 0..count-1 in a real store, and the sample replies a coordinator would send over them."""

    def __init__(self, root: Path, count: int) -> None:
        self.store = LocalStore(root)
        self.arrays = {k: numbered_arrays(k) for k in range(count)}
        self.refs = []
        for k, arrays in self.arrays.items():
            chunk_id = f"chunk{k}"
            path = chunk_path("task1", chunk_id)
            sha = self.store.put(path, encode_chunk(arrays, {"chunk_id": chunk_id}))
            self.refs.append(SampledChunk(chunk_id=chunk_id, payload_path=path, sha256=sha, policy_version=0,
                                          num_envs=N, env_steps=T * N))

    def sample(self, pairs: list[tuple[int, int]], batch_size: int, chunks: list[int] | None = None) -> SampleResponse:
        """pairs of (chunk number, offset); the reply lists `chunks` (default: all) in that order."""
        chunks = list(self.arrays) if chunks is None else chunks
        position = {k: j for j, k in enumerate(chunks)}
        return transition_reply(chunks=[self.refs[k] for k in chunks], chunk_index=[position[k] for k, _ in pairs],
                              offsets=[off for _, off in pairs], batch_size=batch_size,
                              buffer_transitions=len(self.arrays) * T * N,
                              directive=Directive(run_state="running"))
