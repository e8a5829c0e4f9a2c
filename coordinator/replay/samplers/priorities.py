"""Priorities for prioritized replay (Schaul et al., 2016): an item's leaf is (priority + epsilon)**alpha, so
P(i) ~ priority_i**alpha and no item starves; new items enter at the largest priority seen so each is drawn at
least once soon. Priorities arrive from the learner as |TD error|.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Priorities:
    def __init__(self, alpha: float, epsilon: float) -> None:
        self.alpha, self.epsilon = alpha, epsilon
        self.max_priority = 1.0

    @property
    def new_leaf(self) -> float:
        return self.max_priority ** self.alpha

    def leaves(self, priorities: np.ndarray) -> np.ndarray:
        """The leaves for these priorities; the largest priority seen rises with them, never falls."""
        values = priorities + self.epsilon
        self.max_priority = max(self.max_priority, float(values.max()))
        return values ** self.alpha

    def state_dict(self) -> dict[str, Any]:
        return {"max_priority": self.max_priority}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.max_priority = float(state["max_priority"])
