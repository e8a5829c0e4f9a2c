"""Chunks of a recurrent run (with the `core_state` column) stored for real, and sequence sample replies over them:
what the sequence loop's reader and its learners read."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlfleet.learner_worker.sequences import SequenceCache
from rlfleet.shared.payloads.codec import encode_chunk
from rlfleet.shared.payloads.schema import ChunkSchema
from rlfleet.shared.storage.layout import chunk_path
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import Directive, SampledChunk, SampleResponse
from tests.support.policies import flat_spaces

T, N, D, ACTIONS, HIDDEN = 10, 2, 3, 3, 8  # steps, envs, observation size, actions and GRU width of every chunk
SPACES = flat_spaces(D, ACTIONS)
STATE_SHAPES = {"gru": (HIDDEN,), "lstm": (2, HIDDEN)}


def core_chunk(number: int, steps: int = T, envs: int = N, ends: float = 0.15, kind: str = "gru"
               ) -> dict[str, np.ndarray]:
    """obs[t, i] = (number, t, i): each row names its chunk, step and env; a random nonzero stored state of a `kind`
    core."""
    rng = np.random.default_rng(number)
    obs = np.zeros((steps, envs, D), np.float32)
    obs[..., 0] = number
    obs[..., 1] = np.arange(steps)[:, None]
    obs[..., 2] = np.arange(envs)[None, :]
    return {"obs": obs, "next_obs": obs + np.float32(0.5), "actions": rng.integers(0, ACTIONS, (steps, envs)),
            "rewards": rng.normal(size=(steps, envs)).astype(np.float32),
            "terminated": rng.random((steps, envs)) < ends, "truncated": rng.random((steps, envs)) < ends / 2,
            "valid": np.ones((steps, envs), bool),
            "core_state": rng.uniform(-1, 1, (envs, *STATE_SHAPES[kind])).astype(np.float32)}


class StoredSequences:
    """Chunks in a real store, and the sequence sample replies a coordinator would send over them."""

    def __init__(self, root: Path, chunks: list[dict[str, np.ndarray]], kind: str = "gru") -> None:
        self.store = LocalStore(root)
        self.schema = ChunkSchema.of(SPACES, behaviour_logp=False, core_state=STATE_SHAPES[kind])
        self.arrays = chunks
        self.refs = []
        for k, arrays in enumerate(chunks):
            chunk_id = f"chunk{k}"
            path = chunk_path("task1", chunk_id)
            sha = self.store.put(path, encode_chunk(arrays, {"chunk_id": chunk_id}))
            steps, envs = arrays["rewards"].shape
            self.refs.append(SampledChunk(chunk_id=chunk_id, payload_path=path, sha256=sha, policy_version=0,
                                          num_envs=envs, env_steps=steps * envs))

    def cache(self, burn_in: int, gamma: float = 0.9, n_step: int = 3) -> SequenceCache:
        return SequenceCache(self.store, self.schema, gamma, n_step, burn_in, max_chunks=8)

    def sample(self, items: list[tuple[int, int, int]], length: int, batch_size: int) -> SampleResponse:
        """items of (chunk number, first row, env column), ids 100, 101, ... and weights 0.5, 0.6, ...
        in that order."""
        offsets = [first * self.refs[c].num_envs + col for c, first, col in items]
        return SampleResponse(unit="sequence", chunks=self.refs, chunk_index=[c for c, _, _ in items],
                              offsets=offsets, lengths=[length] * len(items),
                              ids=[100 + k for k in range(len(items))],
                              weights=[0.5 + 0.1 * k for k in range(len(items))], batch_size=batch_size,
                              buffer_transitions=sum(r.env_steps for r in self.refs),
                              directive=Directive(run_state="running"))
