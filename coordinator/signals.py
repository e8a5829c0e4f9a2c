"""A wake-up for coroutines waiting on a condition (a newer policy, servable data), without a thread each.

`fire()` wakes every current waiter; each re-checks its own condition and waits again if it still does not
hold. Waiters are released a slice per event-loop iteration, oldest first, not all in one: a publish at
1,000 collectors releases 1,000 heartbeat long polls, and answered in one loop iteration they held the loop
for 200-350 ms (measured with bench/coordinator_load.py), so a health probe or chunk report arriving meanwhile
waited for all of them. Between slices the loop polls its sockets, so other requests interleave.

Owned by the run, not by a component, so a component reloaded from the journal keeps its waiters.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Signal:
    def __init__(self, slice_size: int = 64) -> None:
        if slice_size < 1:
            raise ValueError(f"slice_size must be >= 1, got {slice_size}")
        self.slice_size = slice_size
        self.fired = 0
        self._waiting: dict[asyncio.Future[None], None] = {}  # insertion-ordered: oldest waiter first
        self._releasing: deque[asyncio.Future[None]] = deque()

    def fire(self) -> None:
        """Wake every current waiter (call on the loop's thread; harmless with no waiter or no loop)."""
        self.fired += 1
        if not self._waiting:
            return
        first = next(iter(self._waiting))
        idle = not self._releasing
        self._releasing.extend(self._waiting)
        self._waiting.clear()
        if idle:
            first.get_loop().call_soon(self._release_slice)

    def _release_slice(self) -> None:
        for _ in range(min(self.slice_size, len(self._releasing))):
            _wake(self._releasing.popleft())
        if self._releasing:  # call_soon runs in the next iteration, after the loop has polled its sockets
            self._releasing[0].get_loop().call_soon(self._release_slice)

    @property
    def waiters(self) -> int:
        """Coroutines waiting or being released."""
        return len(self._waiting) + len(self._releasing)

    async def wait(self, timeout: float) -> None:
        """Return when fired or after `timeout` seconds, whichever comes first."""
        if timeout <= 0:
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._waiting[future] = None
        timer = loop.call_later(timeout, _wake, future)
        try:
            await future
        finally:
            timer.cancel()
            self._waiting.pop(future, None)  # timed out or cancelled; a released one is already gone


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
