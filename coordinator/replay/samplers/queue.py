"""The queue samplers, fifo and lifo: items handed out in arrival order (oldest or newest first), each at most
once per call, for on-policy data that a learner consumes whole (with `max_use=1`, once).

An insertion-ordered dict of item slots: O(1) to add and to remove any item (overwrite, max_use, staleness
remove from the middle), and a draw reads the first `count` from either end.
"""

from __future__ import annotations

from collections import OrderedDict
from itertools import islice
from typing import Any

import numpy as np


class QueueSampler:
    repeats = False
    max_priority = 1.0
    new_leaf = 1.0

    def __init__(self, newest_first: bool) -> None:
        self.newest_first = newest_first
        self.queue: OrderedDict[int, None] = OrderedDict()  # item slots in insertion order

    def insert(self, slots: np.ndarray, starts: np.ndarray, leaf: float) -> None:
        self.queue.update(dict.fromkeys(slots[starts].tolist()))

    def remove(self, item_slots: np.ndarray, refresh: bool = True) -> None:
        for slot in item_slots.tolist():
            self.queue.pop(slot, None)

    def available(self) -> bool:
        return bool(self.queue)

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        order = reversed(self.queue) if self.newest_first else iter(self.queue)
        return np.fromiter(islice(order, count), np.int64)

    def weights(self, slots: np.ndarray, beta: float) -> np.ndarray:
        return np.ones(len(slots))

    def leaves(self, slots: np.ndarray) -> np.ndarray:
        return np.ones(len(slots))

    def set_leaves(self, slots: np.ndarray, leaves: np.ndarray) -> None:
        """Nothing to restore: a queue's items all weigh 1 and its order is the order they were written in."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing of its own to restore: its order comes back as the items are written again."""
