"""The event-loop thread's promise to an interrupted cell: cancelled work stops, even where Python
3.11's ``asyncio.wait_for`` (inside the SDK) loses the cancellation."""

from __future__ import annotations

import asyncio

import pytest

from sbnotebook.core.connections.loop import stop_if_cancelled


async def test_a_cancellation_lost_inside_wait_for_still_stops_the_loop() -> None:
    """The SDK awaits ``wait_for`` in every receive. On 3.11, a cancel that lands as the awaited
    result arrives is swallowed: the loop below would run all 100 rounds. ``stop_if_cancelled``
    at the top of each round ends it at the next one."""
    rounds = 0
    ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def loop_like_the_kits() -> None:
        nonlocal rounds
        for _ in range(100):
            stop_if_cancelled()
            rounds += 1
            if rounds == 1:
                await asyncio.wait_for(ready, timeout=10)  # the SDK's receive, as it waits
            else:
                await asyncio.sleep(0)

    task = asyncio.create_task(loop_like_the_kits())
    await asyncio.sleep(0)  # the task is waiting inside wait_for
    ready.set_result(1)  # the result arrives ...
    task.cancel()  # ... and the interrupt with it, in the same turn of the loop
    with pytest.raises(asyncio.CancelledError):
        await task
    assert rounds == 1, rounds  # stopped at the top of the next round (without the check, 3.11 runs 100)


async def test_a_task_not_cancelled_is_never_stopped() -> None:
    async def work() -> int:
        for _ in range(3):
            stop_if_cancelled()
            await asyncio.sleep(0)
        return 3

    assert await work() == 3
