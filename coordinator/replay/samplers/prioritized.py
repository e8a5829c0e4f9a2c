"""The prioritized sampler (Schaul et al., 2016): P(i) ~ priority_i**alpha over a sum-tree, with importance
weights, new items entering at the largest priority seen so they are drawn at least once soon.

Priorities arrive from the learner as |TD error| for item ids; the buffer checks the ids still name live items
and hands the slots here. A leaf is (priority + epsilon)**alpha, so no item starves.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coordinator.replay.sumtree import SumTree


class PrioritizedSampler:
    repeats = True

    def __init__(self, capacity: int, alpha: float, epsilon: float) -> None:
        self.tree = SumTree(capacity)
        self.alpha, self.epsilon = alpha, epsilon
        self.max_priority = 1.0

    @property
    def new_leaf(self) -> float:
        return self.max_priority ** self.alpha

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
        # w_i = (N * P(i))**-beta / max_j (N * P(j))**-beta = (leaf_i / min leaf)**-beta
        return (self.tree.get(slots) / self.tree.min) ** -beta

    def update(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        """New priorities for live items (the buffer has checked the slots still hold the ids they were for)."""
        values = priorities + self.epsilon
        self.tree.set(slots, values ** self.alpha)
        self.max_priority = max(self.max_priority, float(values.max()))

    def leaves(self, slots: np.ndarray) -> np.ndarray:
        return self.tree.get(slots)

    def set_leaves(self, slots: np.ndarray, leaves: np.ndarray) -> None:
        self.tree.set(slots, leaves)

    def state_dict(self) -> dict[str, Any]:
        return {"max_priority": self.max_priority}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.max_priority = float(state["max_priority"])
