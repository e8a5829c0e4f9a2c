"""Signal: every waiter wakes on fire; a wait without a fire ends at its timeout."""

from __future__ import annotations

import asyncio

from rlfleet.coordinator.signals import Signal


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


def test_fire_releases_a_slice_per_loop_iteration_oldest_first() -> None:
    """Between slices the loop gets to run other callbacks (and poll its sockets)."""

    async def main() -> tuple[list[int], list[int]]:
        signal, woken, progress = Signal(slice_size=10), [], []

        async def waiter(i: int) -> None:
            await signal.wait(5.0)
            woken.append(i)

        tasks = []
        for i in range(45):
            tasks.append(asyncio.create_task(waiter(i)))
            await asyncio.sleep(0)  # each starts waiting in turn: i is its place in line
        signal.fire()
        while len(woken) < 45:
            progress.append(len(woken))
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return woken, progress

    woken, progress = asyncio.run(main())
    assert woken == list(range(45))
    steps = [b - a for a, b in zip(progress, [*progress[1:], 45], strict=True)]
    assert max(steps) <= 10 and len([s for s in steps if s]) >= 5, progress


def test_a_waiter_that_timed_out_or_was_cancelled_is_skipped_when_released() -> None:
    async def main() -> int:
        signal = Signal(slice_size=2)
        quick = asyncio.create_task(signal.wait(0.01))
        cancelled = asyncio.create_task(signal.wait(5.0))
        patient = asyncio.create_task(signal.wait(5.0))
        await asyncio.sleep(0.05)
        cancelled.cancel()
        await asyncio.sleep(0)
        signal.fire()
        await asyncio.wait_for(patient, 1.0)
        assert quick.done() and cancelled.cancelled()
        return signal.waiters

    assert asyncio.run(main()) == 0


def test_slice_size_must_be_positive() -> None:
    import pytest

    with pytest.raises(ValueError, match="slice_size"):
        Signal(slice_size=0)
