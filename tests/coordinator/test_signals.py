"""Signal: every waiter wakes on fire; a wait without a fire ends at its timeout."""

from __future__ import annotations

import asyncio

from coordinator.signals import Signal


def test_fire_wakes_every_waiter_at_once() -> None:
    async def main() -> list[int]:
        signal, woken = Signal(), []

        async def waiter(i: int) -> None:
            await signal.wait(5.0)
            woken.append(i)

        tasks = [asyncio.create_task(waiter(i)) for i in range(300)]
        await asyncio.sleep(0)
        signal.fire()
        await asyncio.wait_for(asyncio.gather(*tasks), 1.0)  # far below the 5 s they would wait unfired
        return woken

    assert sorted(asyncio.run(main())) == list(range(300))


def test_wait_returns_after_its_timeout_when_nothing_fires() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await Signal().wait(0.05)
        return loop.time() - start

    assert 0.04 <= asyncio.run(main()) < 1.0


def test_fire_without_waiters_or_a_loop_is_harmless() -> None:
    signal = Signal()
    signal.fire()
    assert signal.fired == 1
