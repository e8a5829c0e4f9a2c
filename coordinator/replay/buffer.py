"""The coordinator's replay buffer: storage, sampler and removers over chunk *metadata*.

Storage is a ring of transition slots (one per payload row) so capacity is exact and FIFO eviction happens
row by row; every row gets an id that is never reused (slot = id % capacity), which is how a priority update
for an entry overwritten in the meantime is recognised and ignored instead of landing on its successor.
Items (the sampling unit: transitions, sequences, episodes or whole chunks) are keyed by the slot of their
first row. Samplers: a sum-tree (uniform: every item weighs 1; prioritized: priority**alpha, new items at the
current max priority) or a FIFO/LIFO queue. Removers: ring overwrite at capacity, `max_use`, `max_staleness`.
A chunk whose items are all gone is dropped and handed back so its payload file can be deleted.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from coordinator.replay.sumtree import SumTree
from coordinator.replay.units import chunk_items
from shared.config.run_config import ReplayConfig, SamplingConfig


@dataclass(frozen=True)
class Entry:
    """A chunk as reported by its collector: what the journal stores and the buffer is rebuilt from."""

    chunk_id: str
    payload_path: str
    sha256: str
    transitions: int
    policy_version: int
    num_envs: int = 1
    ends: tuple[int, ...] = ()
    fresh_columns: tuple[int, ...] = ()


@dataclass
class Chunk:
    entry: Entry
    key: int
    base_id: int
    initial_leaf: float
    live_rows: int
    live_items: int


@dataclass
class Sampled:
    """Items drawn by one sample call, columnar, plus the chunks that dropped out because of it (max_use)."""

    chunks: list[Chunk]
    chunk_index: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    ids: np.ndarray
    weights: np.ndarray
    gone: list[Entry] = field(default_factory=list)


class ReplayBuffer:
    def __init__(self, buffer_id: str, replay: ReplayConfig, sampling: SamplingConfig) -> None:
        self.buffer_id = buffer_id
        self.replay, self.sampling = replay, sampling
        self.capacity = cap = replay.capacity_transitions
        self.prioritized = replay.sampler == "prioritized"
        self.ids = np.full(cap, -1, np.int64)      # row id held by each slot, -1 when free
        self.chunk_key = np.full(cap, -1, np.int32)
        self.length = np.zeros(cap, np.int32)      # > 0 where a live item starts
        self.uses = np.zeros(cap, np.int32)
        self.tree = SumTree(cap) if replay.sampler in ("uniform", "prioritized") else None
        self.queue: OrderedDict[int, None] = OrderedDict()  # item slots in insertion order (fifo/lifo)
        self.chunks: dict[int, Chunk] = {}
        self.by_id: dict[str, Chunk] = {}
        self.head = 0              # next row id
        self._next_key = 0
        self.transitions = 0       # live rows
        self.items = 0             # live items
        self.item_steps = 0        # steps covered by live items
        self.max_priority = 1.0
        self.evicted_chunks = self.removed_max_use = self.removed_stale = self.unservable = 0

    def __len__(self) -> int:
        return len(self.chunks)

    def __contains__(self, chunk_id: str) -> bool:
        return chunk_id in self.by_id

    def entries(self) -> list[Entry]:
        return [c.entry for c in sorted(self.chunks.values(), key=lambda c: c.base_id)]

    @property
    def new_leaf(self) -> float:
        return self.max_priority ** self.replay.alpha if self.prioritized else 1.0

    # ----- insertion and removal --------------------------------------------------------------------------
    def _check(self, entry: Entry) -> None:
        rows = entry.transitions
        if entry.chunk_id in self.by_id:
            raise ValueError(f"chunk {entry.chunk_id!r} is already in buffer {self.buffer_id!r}")
        if entry.num_envs < 1 or not 0 < rows <= self.capacity or rows % entry.num_envs:
            raise ValueError(f"chunk of {rows} rows / {entry.num_envs} envs does not fit a buffer of "
                             f"{self.capacity} transitions")
        if entry.ends and (min(entry.ends) < 0 or max(entry.ends) >= rows):  # checked before anything changes
            raise ValueError(f"chunk {entry.chunk_id!r}: episode ends must be row indices below {rows}")

    def add_many(self, entries: list[Entry]) -> tuple[list[Chunk], list[Entry]]:
        """`add` each entry in order, with one pass of the array and sum-tree work over all their rows (a chunk
        batch of 16 reports costs about what one did). The same state results as adding them one by one."""
        total = sum(e.transitions for e in entries)
        if len(entries) < 2 or total > self.capacity:  # a later chunk would overwrite an earlier one of the batch
            added, gone = [], []
            for e in entries:
                chunk, out = self.add(e)
                added.append(chunk)
                gone += out
            return added, gone
        for e in entries:
            self._check(e)
        if len({e.chunk_id for e in entries}) < len(entries):
            raise ValueError("a chunk id appears twice in one batch")
        slots = (self.head + np.arange(total)) % self.capacity
        gone = self._overwrite(slots, refresh_tree=False)  # the tree.set over all of `slots` below refreshes it
        leaf = self.new_leaf
        self.ids[slots] = self.head + np.arange(total)
        self.length[slots] = 0
        self.uses[slots] = 0
        keys = np.empty(total, np.int32)
        leaves = np.zeros(total) if self.tree is not None else None
        added, offset = [], 0
        for e in entries:
            rows = e.transitions
            chunk = Chunk(e, self._next_key, self.head + offset, leaf, rows, 0)
            self._next_key += 1
            keys[offset:offset + rows] = chunk.key
            starts, lengths = chunk_items(self.sampling.unit, rows // e.num_envs, e.num_envs, list(e.ends),
                                          list(e.fresh_columns), self.sampling)
            self.length[slots[offset + starts]] = lengths
            if leaves is not None:
                leaves[offset + starts] = leaf
            else:
                self.queue.update(dict.fromkeys(slots[offset + starts].tolist()))
            chunk.live_items = len(starts)
            self.items += len(starts)
            self.item_steps += int(lengths.sum())
            self.chunks[chunk.key] = chunk
            self.by_id[e.chunk_id] = chunk
            added.append(chunk)
            offset += rows
        self.chunk_key[slots] = keys
        if self.tree is not None and leaves is not None:
            self.tree.set(slots, leaves)
        self.transitions += total
        self.head += total
        for chunk in added:
            if chunk.live_items == 0:  # e.g. no whole episode inside: nothing to serve, keep nothing
                self.unservable += 1
                gone.append(self.drop(chunk))
        return added, gone

    def add(self, entry: Entry, initial_leaf: float | None = None) -> tuple[Chunk, list[Entry]]:
        """Write a chunk's rows at the ring head; return its record and the chunks that fell out."""
        self._check(entry)
        rows = entry.transitions
        slots = (self.head + np.arange(rows)) % self.capacity
        gone = self._overwrite(slots, refresh_tree=False)  # the tree.set over all of `slots` below refreshes it
        leaf = self.new_leaf if initial_leaf is None else initial_leaf
        chunk = Chunk(entry, self._next_key, self.head, leaf, rows, 0)
        self._next_key += 1
        self.ids[slots] = self.head + np.arange(rows)
        self.chunk_key[slots] = chunk.key
        self.length[slots] = 0
        self.uses[slots] = 0
        starts, lengths = chunk_items(self.sampling.unit, rows // entry.num_envs, entry.num_envs,
                                      list(entry.ends), list(entry.fresh_columns), self.sampling)
        item_slots = slots[starts]
        self.length[item_slots] = lengths
        if self.tree is not None:
            leaves = np.zeros(rows)
            leaves[starts] = leaf
            self.tree.set(slots, leaves)
        else:
            self.queue.update(dict.fromkeys(item_slots.tolist()))
        chunk.live_items = len(starts)
        self.items += len(starts)
        self.item_steps += int(lengths.sum())
        self.transitions += rows
        self.head += rows
        self.chunks[chunk.key] = chunk
        self.by_id[entry.chunk_id] = chunk
        if chunk.live_items == 0:  # e.g. no whole episode inside: nothing to serve, keep nothing
            self.unservable += 1
            gone.append(self.drop(chunk))
        return chunk, gone

    def _overwrite(self, slots: np.ndarray, refresh_tree: bool = True) -> list[Entry]:
        """Take `slots` away from their current chunks (FIFO at capacity); chunks left without items go.
        `refresh_tree=False` leaves the sums above `slots` stale for a caller that sets all of `slots` next."""
        held = slots[self.ids[slots] >= 0]
        if len(held) == 0:
            return []
        self._kill_items(held[self.length[held] > 0], refresh_tree)
        keys, counts = np.unique(self.chunk_key[held], return_counts=True)
        self.ids[held] = -1
        self.chunk_key[held] = -1
        self.transitions -= len(held)
        gone = []
        for key, n in zip(keys.tolist(), counts.tolist(), strict=True):
            chunk = self.chunks[key]
            chunk.live_rows -= n
            if chunk.live_items == 0:
                self.evicted_chunks += 1
                gone.append(self.drop(chunk))
        return gone

    def _kill_items(self, item_slots: np.ndarray, refresh_tree: bool = True) -> None:
        """Retire live items (their rows stay for other items that span them)."""
        if len(item_slots) == 0:
            return
        self.items -= len(item_slots)
        self.item_steps -= int(self.length[item_slots].sum())
        keys, counts = np.unique(self.chunk_key[item_slots], return_counts=True)
        for key, n in zip(keys.tolist(), counts.tolist(), strict=True):
            self.chunks[key].live_items -= n
        self.length[item_slots] = 0
        if self.tree is not None and refresh_tree:
            self.tree.set(item_slots, np.zeros(len(item_slots)))
        elif self.tree is not None:
            self.tree.clear_leaves(item_slots)
        else:
            for slot in item_slots.tolist():
                self.queue.pop(slot, None)

    def drop(self, chunk: Chunk) -> Entry:
        """Forget a chunk entirely: free its remaining rows and items."""
        own = (chunk.base_id + np.arange(chunk.entry.transitions)) % self.capacity
        own = own[self.chunk_key[own] == chunk.key]
        self._kill_items(own[self.length[own] > 0])
        self.ids[own] = -1
        self.chunk_key[own] = -1
        self.transitions -= len(own)
        del self.chunks[chunk.key]
        del self.by_id[chunk.entry.chunk_id]
        return chunk.entry

    def remove_stale(self, latest_version: int, max_staleness: int | None) -> list[Entry]:
        """Drop chunks collected by a policy more than `max_staleness` versions behind `latest_version`."""
        if max_staleness is None:
            return []
        stale = [c for c in self.chunks.values() if latest_version - c.entry.policy_version > max_staleness]
        self.removed_stale += len(stale)
        return [self.drop(c) for c in stale]

    def expire_below(self, row_id: int) -> list[Entry]:
        """Free rows with ids below `row_id` (used on restore: rows overwritten by chunks no longer kept)."""
        slots = np.flatnonzero((self.ids >= 0) & (self.ids < row_id))
        return self._overwrite(slots)

    # ----- sampling -----------------------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, count: int, beta: float, max_steps: int | None = None) -> Sampled:
        """Up to `count` items (fewer only when max_use or `max_steps` cuts the draw short)."""
        if self.items == 0:
            raise ValueError("cannot sample from an empty buffer")
        if self.tree is not None:
            slots, weights = self._draw_tree(rng, count, beta, max_steps)
        else:
            order = list(self.queue) if self.replay.sampler == "fifo" else list(reversed(self.queue))
            slots = np.asarray(order[:count], np.int64)
            slots = slots[:_within_steps(self.length[slots], max_steps, 0, True)]
            weights = np.ones(len(slots))
        keys = self.chunk_key[slots]
        distinct, index = np.unique(keys, return_inverse=True)
        chunks = [self.chunks[k] for k in distinct.tolist()]
        bases = np.array([c.base_id for c in chunks], np.int64)
        ids = self.ids[slots].copy()
        result = Sampled(chunks, index.astype(np.int64), ids - bases[index], self.length[slots].astype(np.int64),
                         ids, weights)
        result.gone = self._count_uses(slots)
        return result

    def _draw_tree(self, rng: np.random.Generator, count: int, beta: float,
                   max_steps: int | None) -> tuple[np.ndarray, np.ndarray]:
        assert self.tree is not None
        max_use = self.replay.max_use
        picked: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        need, steps = count, 0
        for _ in range(16):  # with max_use, draws past an item's remaining uses are redrawn elsewhere
            if need == 0 or self.tree.total <= 0:
                break
            slots = self.tree.sample(rng, need)
            # w_i = (N * P(i))**-beta / max_j (N * P(j))**-beta = (leaf_i / min leaf)**-beta
            w = (self.tree.get(slots) / self.tree.min) ** -beta if self.prioritized else np.ones(len(slots))
            keep_n = _within_steps(self.length[slots], max_steps, steps, not picked)
            cut = keep_n < len(slots)
            slots, w = slots[:keep_n], w[:keep_n]
            if max_use is not None:
                keep = self._within_uses(slots, max_use)
                slots, w = slots[keep], w[keep]
            picked.append(slots)
            weights.append(w)
            need -= len(slots)
            steps += int(self.length[slots].sum())
            if cut:
                break
        if not picked:
            return np.zeros(0, np.int64), np.zeros(0)
        return np.concatenate(picked), np.concatenate(weights)

    def _within_uses(self, slots: np.ndarray, max_use: int) -> np.ndarray:
        """Mask of the draws within each item's remaining uses; counts them; exhausted items leave the tree
        at once so the rest of this call cannot draw them again."""
        assert self.tree is not None
        order = np.argsort(slots, kind="stable")
        uniq, first, counts = np.unique(slots[order], return_index=True, return_counts=True)
        rank = np.arange(len(slots)) - np.repeat(first, counts)
        remaining = max_use - self.uses[uniq]
        keep = np.empty(len(slots), bool)
        keep[order] = rank < np.repeat(remaining, counts)
        self.uses[uniq] += np.minimum(counts, remaining).astype(np.int32)
        exhausted = uniq[self.uses[uniq] >= max_use]
        self.tree.set(exhausted, np.zeros(len(exhausted)))
        return keep

    def _count_uses(self, slots: np.ndarray) -> list[Entry]:
        """Record the uses of drawn items (tree draws under max_use were counted while drawing); items that
        reached max_use are removed and chunks left without items dropped."""
        if self.tree is None or self.replay.max_use is None:
            uniq, counts = np.unique(slots, return_counts=True)  # ~3x cheaper than np.add.at per request
            self.uses[uniq] += counts.astype(np.int32)
        if self.replay.max_use is None:
            return []
        done = np.unique(slots[self.uses[slots] >= self.replay.max_use])
        return self._retire(done[self.length[done] > 0])

    def _retire(self, item_slots: np.ndarray) -> list[Entry]:
        self.removed_max_use += len(item_slots)
        keys = np.unique(self.chunk_key[item_slots])
        self._kill_items(item_slots)
        return [self.drop(self.chunks[k]) for k in keys.tolist() if self.chunks[k].live_items == 0]

    def apply_uses(self, ids: np.ndarray) -> list[Entry]:
        """Replay journalled draws (restore): ids still present count one use each."""
        slots = ids % self.capacity
        present = slots[(self.ids[slots] == ids) & (self.length[slots] > 0)]
        np.add.at(self.uses, present, 1)
        if self.replay.max_use is None:
            return []
        done = np.unique(present[self.uses[present] >= self.replay.max_use])
        return self._retire(done)

    # ----- priorities ---------------------------------------------------------------------------------------
    def update_priorities(self, ids: np.ndarray, priorities: np.ndarray) -> int:
        """Set priority for items still present (checked by id); returns how many were updated."""
        assert self.tree is not None and self.prioritized
        slots = ids % self.capacity
        ok = (self.ids[slots] == ids) & (self.length[slots] > 0)
        if not ok.any():
            return 0
        values = priorities[ok] + self.replay.priority_epsilon
        self.tree.set(slots[ok], values ** self.replay.alpha)
        self.max_priority = max(self.max_priority, float(values.max()))
        return int(ok.sum())

    def priority_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, sum-tree leaves, uses) of every live item: a compact snapshot for the journal."""
        slots = np.flatnonzero(self.length > 0)
        leaves = self.tree.get(slots) if self.tree is not None else np.ones(len(slots))
        return self.ids[slots].copy(), leaves, self.uses[slots].copy()

    def apply_priority_state(self, ids: np.ndarray, leaves: np.ndarray, uses: np.ndarray, head: int) -> list[Entry]:
        """Restore a snapshot taken when the next row id was `head`: items older than it that the snapshot
        does not list had been removed (max_use) and are removed again."""
        slots = ids % self.capacity
        ok = self.ids[slots] == ids
        slots, leaves, uses = slots[ok], leaves[ok], uses[ok]
        listed = np.zeros(self.capacity, bool)
        listed[slots] = True
        live = (self.length > 0) & (self.ids >= 0) & (self.ids < head)
        gone = self._retire(np.flatnonzero(live & ~listed))
        if self.tree is not None:
            self.tree.set(slots, leaves)
        self.uses[slots] = uses
        return gone


def _within_steps(lengths: np.ndarray, max_steps: int | None, already: int, first: bool) -> int:
    """How many of these items fit under `max_steps` after `already` steps (at least one in the first round)."""
    if max_steps is None:
        return len(lengths)
    fit = int(np.searchsorted(already + np.cumsum(lengths), max_steps, side="right"))
    return max(fit, 1) if first and len(lengths) else fit
