"""A wake-up for coroutines waiting on a condition (a newer policy, servable data), without a thread each.

`fire()` wakes every current waiter at once; each re-checks its own condition and waits again if it still
does not hold. Owned by the run, not by a component, so a component reloaded from the journal keeps its
waiters.
"""

from __future__ import annotations

import asyncio
import contextlib


class Signal:
    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.fired = 0

    def fire(self) -> None:
        self.fired += 1
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, timeout: float) -> None:
        """Return when fired or after `timeout` seconds, whichever comes first."""
        if timeout <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)
