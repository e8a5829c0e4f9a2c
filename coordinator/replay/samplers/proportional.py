"""The sum-tree samplers, uniform and prioritized: items drawn i.i.d. in proportion to their leaf in a sum-tree.

Uniform is the case where every item's leaf is 1; prioritized composes `Priorities`, which turns the learner's
priorities into leaves, and then weights each draw to correct the bias (importance sampling). A sum-tree even for
uniform draws: items come and go by slot (overwrite, max_use, staleness) and the tree skips the gaps in
O(log n) per draw with no list of live items to keep compact.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlfleet.coordinator.replay.samplers.priorities import Priorities
from rlfleet.coordinator.replay.sumtree import SumTree


class ProportionalSampler:
    repeats = True

    def __init__(self, capacity: int, priorities: Priorities | None = None) -> None:
        self.tree = SumTree(capacity)
        self.priorities = priorities  # None: uniform

    @property
    def max_priority(self) -> float:
        return 1.0 if self.priorities is None else self.priorities.max_priority

    @property
    def new_leaf(self) -> float:
        return 1.0 if self.priorities is None else self.priorities.new_leaf

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
        if self.priorities is None:
            return np.ones(len(slots))
        # w_i = (N * P(i))**-beta / max_j (N * P(j))**-beta = (leaf_i / min leaf)**-beta
        return (self.tree.get(slots) / self.tree.min) ** -beta

    def update(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        """New priorities for live items (the buffer has checked the slots still hold the ids they were for)."""
        if self.priorities is None:
            raise ValueError("a uniform sampler takes no priorities: set replay.sampler=prioritized")
        self.tree.set(slots, self.priorities.leaves(priorities))

    def leaves(self, slots: np.ndarray) -> np.ndarray:
        return self.tree.get(slots)

    def set_leaves(self, slots: np.ndarray, leaves: np.ndarray) -> None:
        self.tree.set(slots, leaves)

    def state_dict(self) -> dict[str, Any]:
        return {} if self.priorities is None else self.priorities.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.priorities is not None:
            self.priorities.load_state_dict(state)
