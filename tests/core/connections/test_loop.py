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


def test_what_run_returns_is_freed_at_once_not_by_the_cycle_collector() -> None:
    """The task that ran a call holds its result; the call's submission (interrupts.py) is in the
    task's context. Holding the task back would make a cycle: each result (a page of messages) would
    wait for the cycle collector."""
    import gc
    import weakref

    from sbnotebook.core.connections.loop import LoopThread

    class Page:
        pass

    async def page() -> Page:
        return Page()

    thread = LoopThread("test-loop")
    gc.disable()
    try:
        got = weakref.ref(thread.run(page()))
        assert got() is None
    finally:
        gc.enable()
        thread.stop(asyncio.sleep(0))


async def test_a_step_run_uninterrupted_ends_whatever_cancels_its_caller() -> None:
    """Cancelled twice while the step runs (an impatient second interrupt), the caller still gets
    the step's result, is told it was cancelled, and is not left cancelling."""
    from sbnotebook.core.connections.interrupts import uninterrupted

    release = asyncio.Event()

    async def step() -> str:
        await release.wait()
        return "done"

    async def caller() -> tuple[str, bool, int]:
        result, cut = await uninterrupted(step())
        return result, cut, asyncio.current_task().cancelling()  # type: ignore[union-attr]

    task = asyncio.create_task(caller())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)
    release.set()
    assert await task == ("done", True, 0)


async def test_an_operation_that_does_not_answer_interrupts_is_cancelled_as_before() -> None:
    """Awaited from another loop and cancelled: an operation that answers interrupts returns its
    answer; any other is cancelled, its caller's await raising CancelledError."""
    from sbnotebook.core.connections.interrupts import answers_interrupts, taken_back
    from sbnotebook.core.connections.loop import LoopThread

    thread = LoopThread("test-loop")
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def operation(answers: bool) -> str:
        if answers:
            answers_interrupts()
        loop.call_soon_threadsafe(started.set)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            if not answers:
                raise
            taken_back()
            return "its report"
        return "not interrupted"

    try:
        for answers in (True, False):
            started.clear()
            task = asyncio.create_task(thread.call(operation(answers)))
            await started.wait()
            task.cancel()
            if answers:
                assert await task == "its report" and task.cancelling() == 0
            else:
                with pytest.raises(asyncio.CancelledError):
                    await task
    finally:
        await asyncio.to_thread(thread.stop, asyncio.sleep(0))
