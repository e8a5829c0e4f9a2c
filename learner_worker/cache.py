"""Decoded chunks kept in learner memory, with their n-step targets precomputed once per chunk.

Each payload is read once (sha256 verified, decoded without pickle); afterwards a sampled reference costs a
numpy gather. Least recently used chunks are dropped beyond `max_chunks`.

A payload that is gone (FileNotFoundError: evicted since the sample) is skipped quietly. One that is there but
unusable (hash mismatch, undecodable, wrong shapes or dtypes, content that disagrees with its report, unreadable)
is skipped and queued for a report:
otherwise the coordinator would keep serving it and the learner keep skipping it, unseen. The reader does no
HTTP; the thread that already talks to the coordinator for it sends the reports (`take_corrupt`). An object
store that stays unreachable (StoreUnavailable) is no payload's fault: it propagates and ends the learner.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from rlfleet.learner_worker.nstep import nstep_targets
from rlfleet.shared.payloads.codec import PayloadError, decode_chunk
from rlfleet.shared.payloads.framestack import flat_columns
from rlfleet.shared.payloads.schema import ChunkSchema, SchemaError
from rlfleet.shared.storage.protocol import IntegrityError, PayloadStore, StorePathError
from rlfleet.shared.wire import SampledChunk, SampleResponse

log = logging.getLogger(__name__)
FIELDS = ("obs", "actions", "returns", "boot_obs", "discount")


@dataclass
class Prepared:
    obs: np.ndarray        # [M, *obs]
    actions: np.ndarray    # [M, *action]
    returns: np.ndarray    # [M]
    boot_obs: np.ndarray   # [M, *obs]
    discount: np.ndarray   # [M]
    valid: np.ndarray      # [M] False where the env raised: never trained on


class PayloadReader:
    """Reads sampled chunks from the store, verified against the run's chunk schema, and counts what could not
    be read (both loops)."""

    def __init__(self, store: PayloadStore, schema: ChunkSchema) -> None:
        self.store, self.schema = store, schema
        self.loaded = 0
        self.missing = 0
        self.corrupt = 0
        self._unreported: list[tuple[str, str]] = []

    def read(self, ref: SampledChunk) -> dict[str, np.ndarray] | None:
        """A chunk's arrays, verified (sha256, shapes, dtypes, then rows against the report, action range and
        finiteness: ChunkSchema.check_values); None when it is gone or unusable (counted, and unusable ones queued
        for `take_corrupt`). A compact chunk's frames come back as flat `obs` and `next_obs` stacks
        (shared/payloads/framestack.py), so every algorithm reads one layout."""
        try:
            arrays, _ = decode_chunk(self.store.get(ref.payload_path, ref.sha256))
            self.schema.check(arrays, ref.num_envs)
            self.schema.check_values(arrays, ref.env_steps)
            arrays = flat_columns(arrays)
        except FileNotFoundError:
            self.missing += 1  # evicted between the sample and the load: skip its references
            return None
        # OSError: a directory, EACCES, EIO
        except (IntegrityError, PayloadError, SchemaError, StorePathError, OSError) as exc:
            self._unusable(ref, f"{type(exc).__name__}: {exc}")
            return None
        self.loaded += 1
        return arrays

    def _unusable(self, ref: SampledChunk, reason: str) -> None:
        self.corrupt += 1
        self._unreported.append((ref.chunk_id, reason))
        log.warning("skipping chunk %s: %s", ref.chunk_id, reason)

    def take_corrupt(self) -> list[tuple[str, str]]:
        """(chunk id, reason) of each unusable payload found since the last call, for the coordinator.

        Called by the thread that reads (the replay loop's prefetcher, or the chunk loop itself): no lock."""
        taken, self._unreported = self._unreported, []
        return taken


class BatchReader(PayloadReader, ABC):
    """A replay reader: turns the coordinator's sample replies into training batches (what the prefetcher and the
    lockstep fetcher hand the training loop). Transitions: `ChunkCache`; sequences: learner_worker/sequences.py."""

    @abstractmethod
    def batches(self, sample: SampleResponse) -> list[dict[str, np.ndarray]]:
        """Full batches from a sample reply; references into unreadable chunks are dropped."""


class ChunkCache(BatchReader):
    """The replay loop's reader: keeps prepared chunks (n-step targets) and assembles batches from item
    references."""

    def __init__(self, store: PayloadStore, schema: ChunkSchema, gamma: float, n_step: int, max_chunks: int,
                 seed: int = 0) -> None:
        super().__init__(store, schema)
        self.rng = np.random.default_rng(seed)
        self.gamma, self.n_step = gamma, n_step
        self.max_chunks = max_chunks
        self._chunks: OrderedDict[str, Prepared] = OrderedDict()

    def _prepare(self, ref: SampledChunk) -> Prepared | None:
        arrays = self.read(ref)
        if arrays is None:
            return None
        rewards, term, trunc, valid = arrays["rewards"], arrays["terminated"], arrays["truncated"], arrays["valid"]
        obs, next_obs, actions = arrays["obs"], arrays["next_obs"], arrays["actions"]
        # A window must stop before a step on which the env raised: cut it there, bootstrapping from next_obs
        # of the step before (== obs of the failed step, a real state); the failed step itself is never used.
        cut = trunc.copy()
        cut[:-1] |= ~valid[1:]
        returns, boot_obs, discount = nstep_targets(rewards, term, cut, next_obs, self.gamma, self.n_step)
        def rows(a: np.ndarray) -> np.ndarray:
            return a.reshape(-1, *a.shape[2:])

        return Prepared(rows(obs), rows(actions), returns.reshape(-1), rows(boot_obs), discount.reshape(-1),
                        valid.reshape(-1))

    def get(self, ref: SampledChunk) -> Prepared | None:
        prepared = self._chunks.get(ref.chunk_id)
        if prepared is not None:
            self._chunks.move_to_end(ref.chunk_id)
            return prepared
        prepared = self._prepare(ref)
        if prepared is not None:
            self._chunks[ref.chunk_id] = prepared
            while len(self._chunks) > self.max_chunks:
                self._chunks.popitem(last=False)
        return prepared

    def batches(self, sample: SampleResponse) -> list[dict[str, np.ndarray]]:
        """Turn a sample reply into full batches; references into unreadable chunks are dropped."""
        prepared = [self.get(ref) for ref in sample.chunks]
        index = np.asarray(sample.chunk_index, np.int64)
        offsets = np.asarray(sample.offsets, np.int64)
        ids = np.asarray(sample.ids, np.int64)
        weights = np.asarray(sample.weights, np.float32)
        ok = np.array([p is not None for p in prepared], bool)
        keep = ok[index] if len(prepared) else np.zeros(0, bool)
        for c in np.unique(index[keep]):  # per distinct chunk, not per row: this is the learner's hot path
            rows = keep & (index == c)
            keep[rows] = prepared[c].valid[offsets[rows]]  # type: ignore[union-attr]
        if not keep.all():
            index, offsets, ids, weights = index[keep], offsets[keep], ids[keep], weights[keep]
        out: dict[str, np.ndarray] = {}
        order = np.argsort(index, kind="stable")
        index, offsets = index[order], offsets[order]
        out["ids"], out["weights"] = ids[order], weights[order]
        bounds = np.flatnonzero(np.diff(index)) + 1
        for name in FIELDS:
            parts = [getattr(prepared[idx[0]], name)[off] for idx, off in
                     zip(np.split(index, bounds), np.split(offsets, bounds), strict=True) if len(idx)]
            out[name] = np.concatenate(parts) if parts else np.zeros(0)
        total = len(index)
        perm = self.rng.permutation(total)
        size = sample.batch_size
        return [{k: v[perm[i:i + size]] for k, v in out.items()} for i in range(0, total - size + 1, size)]
