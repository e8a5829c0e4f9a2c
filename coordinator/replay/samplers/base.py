"""What the replay buffer asks of a sampler: the role every sampler plays (TorchRL's `Sampler`).

A sampler sees items only as slots (the ring slot of an item's first row) and owns whatever it draws them
with (a sum-tree, a queue) plus its own state. The buffer tells it which items arrived and which left, and
asks it for draws; storage, use counts and removal rules are other parts the buffer composes.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class Sampler(Protocol):
    repeats: bool
    """Draws are i.i.d. (an item may come up more than once in a call, so items refused by `max_use` are
    redrawn elsewhere); False: one call hands each item out at most once, in the sampler's order."""

    @property
    def max_priority(self) -> float:
        """The largest priority seen; 1.0, what every item weighs, for samplers that take no priorities (the
        journal and the buffer's status report it for every sampler)."""

    @property
    def new_leaf(self) -> float:
        """The weight a new item gets now; journalled with its chunk so a restore gives it the same."""

    def insert(self, slots: np.ndarray, starts: np.ndarray, leaf: float) -> None:
        """Items arrived: `slots` are every row just written (freed just before with `refresh=False`),
        `starts` the positions in `slots` where an item starts, `leaf` the weight they get."""

    def remove(self, item_slots: np.ndarray, refresh: bool = True) -> None:
        """Items left and must never be drawn again. `refresh=False` may leave aggregate state stale for a
        caller that calls `insert` over all of these slots next (the ring overwriting them)."""

    def available(self) -> bool:
        """Whether anything can be drawn now (items used up during a draw no longer can)."""

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """Up to `count` item slots (int64)."""

    def weights(self, slots: np.ndarray, beta: float) -> np.ndarray:
        """Importance weights of drawn slots at exponent `beta`, computed right after the draw."""

    def leaves(self, slots: np.ndarray) -> np.ndarray:
        """The weights of these items, for the journal's snapshot."""

    def set_leaves(self, slots: np.ndarray, leaves: np.ndarray) -> None:
        """Restore the weights a snapshot recorded."""

    def state_dict(self) -> dict[str, Any]:
        """Scalars for the journal's meta (the leaves travel in the replay log's snapshots instead)."""

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
