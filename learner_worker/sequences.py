"""The sequence loop's learner side (shared/loops/sequences.py): sequence items -> batches a recurrent value
learner unrolls, and the trainer that feeds them through the replay loop's prefetching and priorities.

Each sampled item is `sequence_length` steps of one env column of a chunk. A batch carries, per item, the column's
rows from where its state is known up to the last row any of the item's n-step targets bootstraps from ([T, B, ...],
T the longest over the batch, zero padding after a column's real rows), with the state before the first of them and
the rows' start flags, so the learner can unroll the current (and the target) network through the burn-in prefix
without gradient; `first` is the item's first row in that span. And the item's own rows ([L, B]): actions, n-step
returns, bootstrap rows (in the span) and discounts, and which rows are trained on (`trained`: valid, and warm: the
module doc of shared/loops/sequences.py says which rows are).

Where the span begins: at the chunk's first row with its stored state, unless an episode began between it and the
item's first row: then at the last such start, whose state is zero whatever came before. The rows before it cannot
change the item's states, and cutting them leaves no start flag inside the span (a window never crosses an episode
end, and its targets stop at one), so a GRU unrolls the whole batch in one fused call instead of one call per row
holding a start in any of its sequences (counted on a batch of 32 sequences of 16 rows from a chunk of 8 envs x 64
rows with an episode end in 3% of its rows: 48 GRU calls per update from the chunk's first row, 5 from the spans).

The n-step windows are computed once per chunk over whole columns, cut at episode ends and before an invalid row as
for transitions (learner_worker/cache.py), and may reach past the item's last row inside the chunk: the bootstrap is
the state after that row, which the prefix unroll gives.

Invalid rows (the env raised, or the collector's core state turned non-finite) are zeroed before any network reads
them and never trained on; the row after one starts a fresh state, as the collector's actor did.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from rlfleet.learner_worker.actor_critic import masked
from rlfleet.learner_worker.cache import BatchReader
from rlfleet.learner_worker.loops import ReplayTrainer, cache_chunks
from rlfleet.learner_worker.nstep import nstep_windows
from rlfleet.learner_worker.recurrent import episode_starts
from rlfleet.shared.algorithms.base import ReplayParams, SequenceParams
from rlfleet.shared.payloads.schema import ChunkSchema
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.storage.protocol import PayloadStore
from rlfleet.shared.wire import LearnerTask, SampledChunk, SampleResponse
from rlfleet.shared.worker.session import WorkerSession

PREFIX = ("obs", "next_obs", "starts")  # [T, B, ...]: rows 0 .. T-1 of each item's column
WINDOW = ("actions", "returns", "boot", "discount", "trained")  # [L, B]: the item's own rows


def warm_rows(starts: np.ndarray, state: np.ndarray, burn_in: int) -> np.ndarray:
    """[T, N] bool: rows whose core state the current weights carried over at least `burn_in` rows of the chunk, or
    since an episode began inside it (a start flag at or before the row), or from a zero stored state (the state of
    an episode's first row): the rows a sequence may train on."""
    steps, envs = starts.shape
    fresh = np.logical_not(state.reshape(envs, -1).any(axis=1))
    since_start = np.logical_or.accumulate(starts, axis=0) | fresh[None, :]
    return (np.arange(steps)[:, None] >= burn_in) | since_start


@dataclass
class Columns:
    """One chunk prepared for sequences: [T, N, ...] rows (invalid ones zeroed), the stored state [N, *S]."""

    obs: np.ndarray
    next_obs: np.ndarray
    starts: np.ndarray
    state: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    boot: np.ndarray  # the row whose next observation (and the state after it) each row's n-step target reads
    discount: np.ndarray
    trained: np.ndarray  # valid and warm
    since: np.ndarray  # the last row at or before each row whose state was zeroed (an episode start), else 0

    @property
    def steps(self) -> int:
        return int(self.starts.shape[0])


class SequenceCache(BatchReader):
    """Keeps prepared chunks (least recently used dropped beyond `max_chunks`) and assembles batches of sequences
    from item references. Chunks are read and verified by PayloadReader: a stored state of the wrong shape fails
    the schema's check and is counted and reported as corrupt."""

    def __init__(self, store: PayloadStore, schema: ChunkSchema, gamma: float, n_step: int, burn_in: int,
                 max_chunks: int, seed: int = 0) -> None:
        super().__init__(store, schema)
        if "core_state" not in schema.columns:
            raise ValueError("sequences are unrolled from the chunks' stored core state: the run's chunks carry none "
                             "(set algo.net.core)")
        self.gamma, self.n_step, self.burn_in = gamma, n_step, burn_in
        self.max_chunks = max_chunks
        self.rng = np.random.default_rng(seed)
        self._chunks: OrderedDict[str, Columns] = OrderedDict()

    def prepare(self, arrays: dict[str, np.ndarray]) -> Columns:
        valid = np.asarray(arrays["valid"], bool)
        terminated = np.asarray(arrays["terminated"], bool) & valid
        cut = np.asarray(arrays["truncated"], bool) | ~valid
        cut[:-1] |= ~valid[1:]  # a window stops before a step on which the env raised (learner_worker/cache.py)
        rewards = np.where(valid, arrays["rewards"], 0.0).astype(np.float32)
        returns, boot, discount = nstep_windows(rewards, terminated, cut, self.gamma, self.n_step)
        starts = episode_starts(arrays)
        state = np.asarray(arrays["core_state"], np.float32)
        rows = np.arange(len(starts))[:, None]
        return Columns(obs=masked(arrays["obs"], valid), next_obs=masked(arrays["next_obs"], valid), starts=starts,
                       state=state, actions=masked(arrays["actions"], valid), returns=returns, boot=boot,
                       discount=discount, trained=valid & warm_rows(starts, state, self.burn_in),
                       since=np.maximum.accumulate(np.where(starts, rows, 0), axis=0))

    def get(self, ref: SampledChunk) -> Columns | None:
        columns = self._chunks.get(ref.chunk_id)
        if columns is not None:
            self._chunks.move_to_end(ref.chunk_id)
            return columns
        arrays = self.read(ref)
        if arrays is None:
            return None
        columns = self._chunks[ref.chunk_id] = self.prepare(arrays)
        while len(self._chunks) > self.max_chunks:
            self._chunks.popitem(last=False)
        return columns

    def batches(self, sample: SampleResponse) -> list[dict[str, np.ndarray]]:
        """Full batches of `sample.batch_size` sequences in a random order; items of unreadable chunks are dropped
        (and the remainder short of a batch)."""
        prepared = [self.get(ref) for ref in sample.chunks]
        items = [k for k, c in enumerate(sample.chunk_index) if prepared[c] is not None]
        order = self.rng.permutation(len(items))
        size = sample.batch_size
        out = []
        for begin in range(0, len(items) - size + 1, size):
            picked = [items[k] for k in order[begin:begin + size]]
            out.append(self.batch(sample, prepared, picked))
        return out

    def batch(self, sample: SampleResponse, prepared: list[Columns | None], picked: list[int]) -> dict[str, np.ndarray]:
        """The batch of the sample's items `picked` (module doc)."""
        lengths = {sample.lengths[k] for k in picked}
        if len(lengths) != 1:
            raise ValueError(f"sequence items of one batch must have one length, got {sorted(lengths)}")
        length = lengths.pop()
        views = []
        for k in picked:
            columns = prepared[sample.chunk_index[k]]
            assert columns is not None
            envs = sample.chunks[sample.chunk_index[k]].num_envs
            col, first = sample.offsets[k] % envs, sample.offsets[k] // envs
            if first + length > columns.steps:
                raise ValueError(f"sequence item at row {first} of length {length} runs past its chunk's "
                                 f"{columns.steps} rows")
            window = slice(first, first + length)
            base = int(columns.since[first, col])
            needed = int(columns.boot[window, col].max()) + 1
            views.append((columns, col, base, window, needed))
        steps = max(needed - base for _, _, base, _, needed in views)
        batch: dict[str, np.ndarray] = {}
        for name in PREFIX:
            parts = []
            for columns, col, base, _, needed in views:
                rows = getattr(columns, name)[base:needed, col]
                pad = np.zeros((steps - len(rows), *rows.shape[1:]), rows.dtype)
                parts.append(np.concatenate([rows, pad]) if len(pad) else rows)
            batch[name] = np.stack(parts, axis=1)
        for name in WINDOW:
            batch[name] = np.stack([getattr(c, name)[w, col] for c, col, _, w, _ in views], axis=1)
        batch["boot"] -= np.array([base for _, _, base, _, _ in views], np.int64)[None, :]
        batch["state"] = np.stack([c.state[col] for c, col, _, _, _ in views])
        batch["first"] = np.array([w.start - base for _, _, base, w, _ in views], np.int64)
        batch["ids"] = np.asarray([sample.ids[k] for k in picked], np.int64)
        batch["weights"] = np.asarray([sample.weights[k] for k in picked], np.float32)
        return batch


def trained_rows(batch: dict[str, np.ndarray]) -> np.ndarray:
    """The observations of the rows a sequence batch trains on, [M, *obs]."""
    length, size = batch["trained"].shape
    rows = batch["first"][None, :] + np.arange(length)[:, None]
    return batch["obs"][rows, np.arange(size)[None, :]][batch["trained"]]


class SequenceTrainer(ReplayTrainer):
    """The replay loop's trainer (prefetching, priorities, lockstep turns) over sequence batches."""

    def __init__(self, session: WorkerSession, layout: RunLayout, task: LearnerTask) -> None:
        self.item_steps = task.sampling.sequence_length
        super().__init__(session, layout, task)

    def batch_reader(self, task: LearnerTask, cfg: ReplayParams) -> BatchReader:
        if not isinstance(cfg, SequenceParams):
            raise TypeError(f"{cfg.name} parameters are not a sequence loop's")
        return SequenceCache(self.store, self.schema, cfg.gamma, cfg.n_step, cfg.burn_in,
                             max_chunks=cache_chunks(task), seed=task.seed)

    def trained_obs(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        return trained_rows(batch)
