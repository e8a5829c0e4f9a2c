"""The coordinator's replay buffer over chunk *metadata*: storage, a sampler and removers, composed.

The parts are TorchRL's and Reverb's shape: `RingStorage` (storage.py) holds the ring of row slots, the row ids
and the chunks and items on them; a sampler (samplers/, chosen by `replay.sampler` through its registry) draws
item slots; the removers (removers/) decide what leaves: the ring overwriting at capacity, `max_use`,
`max_staleness`. Each owns its state. The buffer owns only the order of operations between them: a write
frees its slots first (overwrite), a draw is cut to the step budget and to the items' remaining uses, and a
removal is carried out on storage and sampler alike. A chunk whose items are all gone is dropped and handed back
so its payload file can be deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlfleet.coordinator.replay.removers.max_use import MaxUse
from rlfleet.coordinator.replay.removers.overwrite import Overwrite
from rlfleet.coordinator.replay.removers.staleness import MaxStaleness
from rlfleet.coordinator.replay.samplers import ProportionalSampler, Sampler, build_sampler
from rlfleet.coordinator.replay.storage import Chunk, Entry, RingStorage
from rlfleet.shared.config.run_config import ReplayConfig, SamplingConfig

__all__ = ["Chunk", "Entry", "ReplayBuffer", "Sampled"]

REDRAW_ROUNDS = 16  # with max_use, i.i.d. draws past an item's remaining uses are redrawn elsewhere this often


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
        self.storage = RingStorage(buffer_id, replay.capacity_transitions, sampling)
        self.sampler: Sampler = build_sampler(replay)
        self.overwrite = Overwrite()
        self.max_use = MaxUse(replay.capacity_transitions, replay.max_use)
        self.staleness = MaxStaleness()

    # ----- what callers read --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.storage.chunks)

    def __contains__(self, chunk_id: str) -> bool:
        return chunk_id in self.storage.by_id

    def get(self, chunk_id: str) -> Chunk | None:
        return self.storage.by_id.get(chunk_id)

    def entries(self) -> list[Entry]:
        return self.storage.entries()

    @property
    def capacity(self) -> int:
        return self.storage.capacity

    @property
    def head(self) -> int:
        """The next row id: every id below it was issued once."""
        return self.storage.head

    @property
    def transitions(self) -> int:
        return self.storage.transitions

    @property
    def items(self) -> int:
        return self.storage.items

    @property
    def item_steps(self) -> int:
        return self.storage.item_steps

    @property
    def max_priority(self) -> float:
        return self.sampler.max_priority

    # ----- insertion and removal --------------------------------------------------------------------------
    def add(self, entry: Entry) -> tuple[Chunk, list[Entry]]:
        """Write a chunk's rows at the ring head; return its record and the chunks that fell out."""
        (chunk,), gone = self._write([entry], self.sampler.new_leaf)
        return chunk, gone

    def add_many(self, entries: list[Entry]) -> tuple[list[Chunk], list[Entry]]:
        """`add` each entry in order, with one pass of the array and sum-tree work over all their rows (a chunk
        batch of 16 reports costs about what one did). The same state results as adding them one by one."""
        if len(entries) < 2 or sum(e.transitions for e in entries) > self.capacity:
            added, gone = [], []  # a later chunk would overwrite an earlier one of the batch: one at a time
            for e in entries:
                chunk, out = self.add(e)
                added.append(chunk)
                gone += out
            return added, gone
        return self._write(entries, self.sampler.new_leaf)

    def restore_chunk(self, entry: Entry, base_id: int, initial_leaf: float) -> list[Entry]:
        """Re-insert a journalled chunk at the row ids and with the initial weight it had (restore)."""
        self.storage.seek(base_id)
        return self._write([entry], initial_leaf)[1]

    def _write(self, entries: list[Entry], leaf: float) -> tuple[list[Chunk], list[Entry]]:
        self.storage.check(entries)
        slots = self.storage.slots_ahead(sum(e.transitions for e in entries))
        gone = self._overwrite(slots, refresh=False)  # the sampler's insert over all of `slots` refreshes it
        written = self.storage.write(entries, slots, leaf)
        self.max_use.reset(slots)
        self.sampler.insert(slots, written.starts, leaf)
        gone += [self.drop(c) for c in written.chunks if c.live_items == 0]  # unservable: nothing to keep
        return written.chunks, gone

    def _overwrite(self, slots: np.ndarray, refresh: bool = True) -> list[Entry]:
        """Take `slots` away from their current chunks (the ring at capacity); chunks left without items go.
        `refresh=False` is for a write over all of `slots` next (see `Sampler.remove`)."""
        held = slots[self.storage.ids[slots] >= 0]
        if len(held) == 0:
            return []
        self._kill_items(self.storage.item_starts(held), refresh)
        touched = self.storage.free_rows(held)
        return [self.drop(chunk) for chunk in self.overwrite.evicted_from(touched)]

    def _kill_items(self, item_slots: np.ndarray, refresh: bool = True) -> None:
        if len(item_slots) == 0:
            return
        self.storage.kill_items(item_slots)
        self.sampler.remove(item_slots, refresh)

    def drop(self, chunk: Chunk) -> Entry:
        """Forget a chunk entirely: free its remaining rows and items."""
        own = self.storage.rows_of(chunk)
        self._kill_items(self.storage.item_starts(own))
        return self.storage.forget(chunk, own)

    def remove_stale(self, latest_version: int, max_staleness: int | None) -> list[Entry]:
        """Drop chunks collected by a policy more than `max_staleness` versions behind `latest_version`."""
        # a view, not a copy: this runs on every ingest, and returns at once without a limit
        stale = self.staleness.stale(self.storage.chunks.values(), latest_version, max_staleness)
        return [self.drop(c) for c in stale]

    def expire_below(self, row_id: int) -> list[Entry]:
        """Free rows with ids below `row_id` (used on restore: rows overwritten by chunks no longer kept)."""
        return self._overwrite(self.storage.rows_below(row_id))

    # ----- sampling -----------------------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, count: int, beta: float, max_steps: int | None = None) -> Sampled:
        """Up to `count` items (fewer only when max_use or `max_steps` cuts the draw short)."""
        if self.storage.items == 0:
            raise ValueError("cannot sample from an empty buffer")
        slots, weights = self._draw(rng, count, beta, max_steps)
        storage = self.storage
        distinct, index = np.unique(storage.chunk_key[slots], return_inverse=True)
        chunks = [storage.chunks[k] for k in distinct.tolist()]
        bases = np.array([c.base_id for c in chunks], np.int64)
        ids = storage.ids[slots].copy()
        result = Sampled(chunks, index.astype(np.int64), ids - bases[index], storage.length[slots].astype(np.int64),
                         ids, weights)
        result.gone = self._count_uses(slots)
        return result

    def _draw(self, rng: np.random.Generator, count: int, beta: float,
              max_steps: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Draw rounds: each is cut to the step budget and, under max_use, to the items' remaining uses (the
        uses are counted as they are admitted); an i.i.d. sampler redraws what was refused."""
        limited = self.max_use.limit is not None
        picked: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        need, steps = count, 0
        for _ in range(REDRAW_ROUNDS if self.sampler.repeats else 1):
            if need == 0 or not self.sampler.available():
                break
            slots = self.sampler.draw(rng, need)
            w = self.sampler.weights(slots, beta)  # before used-up items leave: that can move the minimum leaf
            keep_n = _within_steps(self.storage.length[slots], max_steps, steps, not picked)
            cut = keep_n < len(slots)
            slots, w = slots[:keep_n], w[:keep_n]
            if limited:
                keep, used_up = self.max_use.admit(slots)
                self.sampler.remove(used_up)
                slots, w = slots[keep], w[keep]
            picked.append(slots)
            weights.append(w)
            need -= len(slots)
            steps += int(self.storage.length[slots].sum())
            if cut:
                break
        if not picked:
            return np.zeros(0, np.int64), np.zeros(0)
        return np.concatenate(picked), np.concatenate(weights)

    def _count_uses(self, slots: np.ndarray) -> list[Entry]:
        """Record the uses of drawn items (under max_use they were counted while drawing); items that reached
        max_use are removed and chunks left without items dropped."""
        if self.max_use.limit is None:
            self.max_use.count(slots)
            return []
        return self._retire(self.storage.item_starts(self.max_use.spent(slots)))

    def _retire(self, item_slots: np.ndarray) -> list[Entry]:
        """Remove used-up items; returns the chunks left without items, dropped."""
        self.max_use.note_removed(len(item_slots))
        chunks = self.storage.chunks_of(item_slots)
        self._kill_items(item_slots)
        return [self.drop(c) for c in chunks if c.live_items == 0]

    def apply_uses(self, ids: np.ndarray) -> list[Entry]:
        """Replay journalled draws (restore): ids still present count one use each."""
        present = ids[self.storage.holds_items(ids)] % self.capacity
        return self._retire(self.max_use.replay(present))

    # ----- priorities ---------------------------------------------------------------------------------------
    def update_priorities(self, ids: np.ndarray, priorities: np.ndarray) -> int:
        """Set priority for items still present (checked by id); returns how many were updated."""
        sampler = self.sampler
        if not isinstance(sampler, ProportionalSampler) or sampler.priorities is None:
            raise ValueError(f"buffer {self.buffer_id!r} uses the {self.replay.sampler} sampler, which takes no "
                             f"priorities")
        ok = self.storage.holds_items(ids)
        if not ok.any():
            return 0
        sampler.update(ids[ok] % self.capacity, priorities[ok])
        return int(ok.sum())

    # ----- persistence --------------------------------------------------------------------------------------
    def priority_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, sampler leaves, uses) of every live item: a compact snapshot for the journal."""
        slots = self.storage.live_items()
        return self.storage.ids[slots].copy(), self.sampler.leaves(slots), self.max_use.uses[slots].copy()

    def apply_priority_state(self, ids: np.ndarray, leaves: np.ndarray, uses: np.ndarray, head: int) -> list[Entry]:
        """Restore a snapshot taken when the next row id was `head`: items older than it that the snapshot
        does not list had been removed (max_use) and are removed again."""
        ok = self.storage.holds(ids)
        slots, leaves, uses = ids[ok] % self.capacity, leaves[ok], uses[ok]
        listed = np.zeros(self.capacity, bool)
        listed[slots] = True
        older = self.storage.items_below(head)
        gone = self._retire(older[~listed[older]])
        self.sampler.set_leaves(slots, leaves)
        self.max_use.uses[slots] = uses
        return gone

    def state_dict(self) -> dict[str, Any]:
        """The buffer's scalars under the journal's keys (head, max_priority and the removal counters), each
        from the part that owns it; the rows, leaves and uses are rebuilt from chunk rows and the replay log.
        `max_priority` is written for every sampler (1.0 without priorities), as the journal always has."""
        return {"max_priority": self.sampler.max_priority, **self.storage.state_dict(),
                **self.sampler.state_dict(), **self.overwrite.state_dict(), **self.max_use.state_dict(),
                **self.staleness.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Set the scalars of `state_dict` (after the rows came back: replaying the log moves the counters)."""
        for part in (self.storage, self.sampler, self.overwrite, self.max_use, self.staleness):
            part.load_state_dict(state)


def _within_steps(lengths: np.ndarray, max_steps: int | None, already: int, first: bool) -> int:
    """How many of these items fit under `max_steps` after `already` steps (at least one in the first round)."""
    if max_steps is None:
        return len(lengths)
    fit = int(np.searchsorted(already + np.cumsum(lengths), max_steps, side="right"))
    return max(fit, 1) if first and len(lengths) else fit
