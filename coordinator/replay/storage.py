"""The replay buffer's storage: a ring of row slots with the chunk and item bookkeeping over it.

The ring holds one slot per payload row (transition) so capacity is exact and overwriting happens row by row.
Every row gets an id that is never reused (slot = id % capacity): that is how a priority update or a journalled
draw for an item overwritten in the meantime is recognised and ignored instead of landing on its successor.
Items (the sampling unit: transitions, sequences, episodes or whole chunks) are keyed by the slot of their first
row, where `length` holds their length in steps. Storage knows nothing of how items are drawn or why they are
removed: the buffer tells it, and tells its sampler and removers the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlfleet.coordinator.replay.units import chunk_items
from rlfleet.shared.config.run_config import SamplingConfig


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
    """A chunk while some of its rows are in the ring: where it starts and what of it is still live."""

    entry: Entry
    key: int
    base_id: int
    initial_leaf: float
    live_rows: int
    live_items: int


@dataclass
class Written:
    """What one write put in the ring: the chunks, every written row's slot in id order, and the positions in
    `slots` where items start (so a sampler can index the rows it was handed)."""

    chunks: list[Chunk]
    slots: np.ndarray
    starts: np.ndarray


class RingStorage:
    """Row slots, their ids and chunks, and the items that start at them."""

    def __init__(self, buffer_id: str, capacity: int, sampling: SamplingConfig) -> None:
        self.buffer_id = buffer_id  # named in errors
        self.capacity = capacity
        self.sampling = sampling
        self.ids = np.full(capacity, -1, np.int64)      # row id held by each slot, -1 when free
        self.chunk_key = np.full(capacity, -1, np.int32)
        self.length = np.zeros(capacity, np.int32)      # > 0 where a live item starts
        self.chunks: dict[int, Chunk] = {}
        self.by_id: dict[str, Chunk] = {}
        self.head = 0              # next row id
        self._next_key = 0
        self.transitions = 0       # live rows
        self.items = 0             # live items
        self.item_steps = 0        # steps covered by live items
        self.unservable = 0        # chunks written that offered no item at all

    def entries(self) -> list[Entry]:
        return [c.entry for c in sorted(self.chunks.values(), key=lambda c: c.base_id)]

    # ----- writing ---------------------------------------------------------------------------------------------
    def check(self, entries: list[Entry]) -> None:
        """Refuse entries that cannot be written, before anything changes."""
        for entry in entries:
            rows = entry.transitions
            if entry.chunk_id in self.by_id:
                raise ValueError(f"chunk {entry.chunk_id!r} is already in buffer {self.buffer_id!r}")
            if entry.num_envs < 1 or not 0 < rows <= self.capacity or rows % entry.num_envs:
                raise ValueError(f"chunk of {rows} rows / {entry.num_envs} envs does not fit a buffer of "
                                 f"{self.capacity} transitions")
            if entry.ends and (min(entry.ends) < 0 or max(entry.ends) >= rows):
                raise ValueError(f"chunk {entry.chunk_id!r}: episode ends must be row indices below {rows}")
        if len({e.chunk_id for e in entries}) < len(entries):
            raise ValueError("a chunk id appears twice in one batch")

    def slots_ahead(self, rows: int) -> np.ndarray:
        """The slots the next `rows` rows will take (the caller frees them first)."""
        return (self.head + np.arange(rows)) % self.capacity

    def write(self, entries: list[Entry], slots: np.ndarray, leaf: float) -> Written:
        """Put the entries' rows in `slots` (from `slots_ahead`, already free) and derive their items; a chunk
        that offers no item (e.g. no whole episode inside) is counted as unservable and left for the caller
        to drop."""
        total = len(slots)
        self.ids[slots] = self.head + np.arange(total)
        self.length[slots] = 0
        chunks, starts, offset = [], [], 0
        keys = np.empty(total, self.chunk_key.dtype)  # one scatter into the ring for the whole batch
        for e in entries:
            rows = e.transitions
            chunk = Chunk(e, self._next_key, self.head + offset, leaf, rows, 0)
            self._next_key += 1
            keys[offset:offset + rows] = chunk.key
            first, lengths = chunk_items(self.sampling.unit, rows // e.num_envs, e.num_envs, list(e.ends),
                                         list(e.fresh_columns), self.sampling)
            self.length[slots[offset + first]] = lengths
            starts.append(offset + first)
            chunk.live_items = len(first)
            self.items += len(first)
            self.item_steps += int(lengths.sum())
            self.chunks[chunk.key] = chunk
            self.by_id[e.chunk_id] = chunk
            chunks.append(chunk)
            offset += rows
        self.chunk_key[slots] = keys
        self.transitions += total
        self.head += total
        self.unservable += sum(c.live_items == 0 for c in chunks)
        return Written(chunks, slots, starts[0] if len(starts) == 1 else np.concatenate(starts))

    def seek(self, head: int) -> None:
        """Set the next row id: restore writes each kept chunk back at the ids it had."""
        self.head = head

    # ----- reading ---------------------------------------------------------------------------------------------
    def item_starts(self, slots: np.ndarray) -> np.ndarray:
        """Those of `slots` where a live item starts."""
        return slots[self.length[slots] > 0]

    def live_items(self) -> np.ndarray:
        """Slots of every live item, ascending."""
        return np.flatnonzero(self.length > 0)

    def holds(self, ids: np.ndarray) -> np.ndarray:
        """Mask of the row ids whose slot still holds them (the row was not overwritten since)."""
        return self.ids[ids % self.capacity] == ids

    def holds_items(self, ids: np.ndarray) -> np.ndarray:
        """Mask of the ids that are the first rows of items still live."""
        slots = ids % self.capacity
        return (self.ids[slots] == ids) & (self.length[slots] > 0)

    def rows_below(self, row_id: int) -> np.ndarray:
        """Slots of live rows with ids below `row_id`."""
        return np.flatnonzero((self.ids >= 0) & (self.ids < row_id))

    def items_below(self, row_id: int) -> np.ndarray:
        """Slots of live items whose first row's id is below `row_id`, ascending."""
        return np.flatnonzero((self.length > 0) & (self.ids >= 0) & (self.ids < row_id))

    def rows_of(self, chunk: Chunk) -> np.ndarray:
        """The slots still holding this chunk's rows."""
        own = (chunk.base_id + np.arange(chunk.entry.transitions)) % self.capacity
        return own[self.chunk_key[own] == chunk.key]

    def chunks_of(self, slots: np.ndarray) -> list[Chunk]:
        """The distinct chunks holding these slots, by key (the order they were written in)."""
        return [self.chunks[k] for k in np.unique(self.chunk_key[slots]).tolist()]

    # ----- removing --------------------------------------------------------------------------------------------
    def kill_items(self, item_slots: np.ndarray) -> None:
        """Retire live items (their rows stay for other items that span them)."""
        if len(item_slots) == 0:
            return
        self.items -= len(item_slots)
        self.item_steps -= int(self.length[item_slots].sum())
        keys, counts = np.unique(self.chunk_key[item_slots], return_counts=True)
        for key, n in zip(keys.tolist(), counts.tolist(), strict=True):
            self.chunks[key].live_items -= n
        self.length[item_slots] = 0

    def free_rows(self, slots: np.ndarray) -> list[Chunk]:
        """Take held rows (whose items are already killed) from their chunks; returns those chunks by key."""
        keys, counts = np.unique(self.chunk_key[slots], return_counts=True)
        self.ids[slots] = -1
        self.chunk_key[slots] = -1
        self.transitions -= len(slots)
        touched = []
        for key, n in zip(keys.tolist(), counts.tolist(), strict=True):
            chunk = self.chunks[key]
            chunk.live_rows -= n
            touched.append(chunk)
        return touched

    def forget(self, chunk: Chunk, own: np.ndarray) -> Entry:
        """Free the chunk's remaining rows `own` (from `rows_of`; its items already killed) and its record."""
        self.ids[own] = -1
        self.chunk_key[own] = -1
        self.transitions -= len(own)
        del self.chunks[chunk.key]
        del self.by_id[chunk.entry.chunk_id]
        return chunk.entry

    # ----- persistence -----------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The scalars the journal keeps; the rows themselves are rebuilt from the journalled chunks."""
        return {"head": self.head, "unservable": self.unservable}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.head = int(state["head"])
        self.unservable = int(state["unservable"])
