"""Replay buffer of chunk *metadata*: the payloads stay in the store, the coordinator keeps who/where/how many.

Sampling is uniform over transitions (a chunk is drawn in proportion to its size, then an offset inside it)
and returned as references, so the learner fetches each payload once and the coordinator never touches
step data. Eviction is FIFO by transitions; evicted entries are handed back so their files can be deleted.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Entry:
    chunk_id: str
    payload_path: str
    sha256: str
    transitions: int
    policy_version: int


class ReplayBuffer:
    def __init__(self, buffer_id: str, capacity_transitions: int) -> None:
        self.buffer_id = buffer_id
        self.capacity = capacity_transitions
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self.transitions = 0
        self.evicted_chunks = 0
        self._index: tuple[list[Entry], np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, chunk_id: str) -> bool:
        return chunk_id in self._entries

    def add(self, entry: Entry) -> list[Entry]:
        """Insert and evict the oldest entries beyond capacity (never the one just added); return evictions."""
        if entry.chunk_id in self._entries:
            raise ValueError(f"chunk {entry.chunk_id!r} is already in buffer {self.buffer_id!r}")
        self._entries[entry.chunk_id] = entry
        self.transitions += entry.transitions
        evicted = []
        while self.transitions > self.capacity and len(self._entries) > 1:
            _, old = self._entries.popitem(last=False)
            self.transitions -= old.transitions
            evicted.append(old)
        self.evicted_chunks += len(evicted)
        self._index = None
        return evicted

    def entries(self) -> list[Entry]:
        return list(self._entries.values())

    def sample(
        self, rng: np.random.Generator, count: int
    ) -> tuple[list[Entry], np.ndarray, np.ndarray]:
        """Draw `count` transitions uniformly: (distinct entries, index into them per draw, offset per draw)."""
        if self.transitions == 0:
            raise ValueError("cannot sample from an empty buffer")
        if self._index is None:
            entries = list(self._entries.values())
            ends = np.cumsum([e.transitions for e in entries], dtype=np.int64)
            self._index = (entries, ends)
        entries, ends = self._index
        picks = rng.integers(0, self.transitions, size=count, dtype=np.int64)
        which = np.searchsorted(ends, picks, side="right")
        offsets = picks - (ends[which] - np.array([entries[i].transitions for i in which], dtype=np.int64))
        distinct, local = np.unique(which, return_inverse=True)
        return [entries[i] for i in distinct], local.astype(np.int64), offsets
