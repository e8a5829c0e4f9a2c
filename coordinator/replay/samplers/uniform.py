"""The uniform sampler: every live item equally likely, drawn i.i.d. over a sum-tree of 0/1 leaves.

A sum-tree rather than `rng.integers` over a list of live items: items come and go by slot (overwrite, max_use,
staleness) and the tree skips the gaps in O(log n) per draw without a list to keep compact, and it draws the
same items for the same seed as the prioritized sampler does at equal priorities.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coordinator.replay.sumtree import SumTree


class UniformSampler:
    repeats = True
    max_priority = 1.0
    new_leaf = 1.0

    def __init__(self, capacity: int) -> None:
        self.tree = SumTree(capacity)

    def insert(self, slots: np.ndarray, starts: np.ndarray, leaf: float) -> None:
        leaves = np.zeros(len(slots))
        leaves[starts] = leaf
        self.tree.set(slots, leaves)

    def remove(self, item_slots: np.ndarray, refresh: bool = True) -> None:
        if refresh:
            self.tree.set(item_slots, np.zeros(len(item_slots)))
        else:
            self.tree.clear_leaves(item_slots)

    def available(self) -> bool:
        return self.tree.total > 0

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return self.tree.sample(rng, count)

    def weights(self, slots: np.ndarray, beta: float) -> np.ndarray:
        return np.ones(len(slots))

    def leaves(self, slots: np.ndarray) -> np.ndarray:
        return self.tree.get(slots)

    def set_leaves(self, slots: np.ndarray, leaves: np.ndarray) -> None:
        self.tree.set(slots, leaves)

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing of its own to restore: its leaves come back with the items."""
