"""max_staleness: chunks collected by a policy too many versions behind the latest leave the buffer (off-policy
data too old to train on, or on-policy data from before the last update)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rlfleet.coordinator.replay.storage import Chunk


class MaxStaleness:
    def __init__(self) -> None:
        self.removed = 0

    def stale(self, chunks: Iterable[Chunk], latest_version: int, max_staleness: int | None) -> list[Chunk]:
        """The chunks more than `max_staleness` versions behind `latest_version` (none without a limit); they
        count as removed."""
        if max_staleness is None:
            return []
        stale = [c for c in chunks if latest_version - c.entry.policy_version > max_staleness]
        self.removed += len(stale)
        return stale

    def state_dict(self) -> dict[str, Any]:
        return {"removed_stale": self.removed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.removed = int(state["removed_stale"])
