"""GC pacing: survivors are frozen every tick, and a full collection (cycles among old objects) comes on time."""

from __future__ import annotations

import gc
import weakref

from rlfleet.coordinator.gcpacing import GcPacing


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_a_cycle_frozen_while_alive_is_reclaimed_by_the_periodic_full_collection_only() -> None:
    clock = Clock()
    pacing = GcPacing(full_every=300.0, clock=clock)
    try:
        a, b = Node(), Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        clock.t = 1.0
        pacing.tick()  # a and b survive (still referenced) and are frozen
        del a, b  # now cyclic garbage, but frozen: the cheap ticks leave it alone
        clock.t = 2.0
        pacing.tick()
        assert ref() is not None and pacing.full_collections == 0
        clock.t = 301.0
        pacing.tick()  # the periodic full collection unfreezes and reclaims it
        assert ref() is None and pacing.full_collections == 1
    finally:
        gc.unfreeze()
