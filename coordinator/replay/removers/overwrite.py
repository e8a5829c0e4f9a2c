"""Overwrite at capacity: the ring writes new rows over the oldest, item by item; a chunk goes once the last of
its items has been overwritten (a partly overwritten chunk keeps serving the items it still holds whole)."""

from __future__ import annotations

from typing import Any

from rlfleet.coordinator.replay.storage import Chunk


class Overwrite:
    def __init__(self) -> None:
        self.evicted = 0

    def evicted_from(self, touched: list[Chunk]) -> list[Chunk]:
        """Of the chunks that just lost rows to the ring, those left without any item: they go, and count."""
        gone = [chunk for chunk in touched if chunk.live_items == 0]
        self.evicted += len(gone)
        return gone

    def state_dict(self) -> dict[str, Any]:
        return {"evicted_chunks": self.evicted}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.evicted = int(state["evicted_chunks"])
