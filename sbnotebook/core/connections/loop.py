"""The event-loop thread: the single way the synchronous API runs async work.

A :class:`LoopThread` owns one asyncio loop running on its own daemon thread, started on first use.
``run`` waits for a coroutine from any other thread (cells, widget callbacks, Spark tasks), also
while Jupyter's own loop is running; ``call`` awaits one from any event loop; ``iterate`` turns an
async generator into a synchronous iterator; ``stop`` runs a last coroutine, cancels what is left
and ends the thread. It knows nothing of Service Bus: :class:`~sbnotebook.core.connections.pools.LinkPools` adds
the link pools and the reconnect on top, and :class:`~sbnotebook.core.connections.live.LiveConnection` the SDK
client's lifecycle and the admin client.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sys
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

from .interrupts import Submission, taken_back, uninterrupted

T = TypeVar("T")
log = logging.getLogger("sbnotebook.live")


class LoopThread:
    """One event loop on its own thread (see the module docstring)."""

    def __init__(self, name: str = "sbnotebook-live") -> None:
        self._thread_name = name
        # Re-entrant: while it is held (starting the thread, scheduling), an allocation can run the
        # cycle collector, which can free a LockedBatch whose __del__ calls spawn_if_running on the
        # same thread; a plain Lock made that thread wait for itself forever.
        self._start_lock = threading.RLock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        with self._start_lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._thread_name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def on_loop(self) -> bool:
        """Whether the caller runs on this loop (where waiting for it would deadlock)."""
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def loop_closed(self) -> bool:
        """No loop running: never started, or stopped."""
        return self._loop is None or self._loop.is_closed()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None, *, grace: float = 0.0) -> T:
        """Run a coroutine on this loop and wait for it (from any other thread). Interrupted, it is
        cancelled, and waited for at most ``grace`` seconds more (its clean-up: a record saved); or,
        if it answers interrupts (``interrupts.py``), waited for: its answer is returned."""
        if self.on_loop():
            coro.close()
            raise RuntimeError(
                "A synchronous sbnotebook call was made from the connection's own event loop; use the a* form."
            )
        submitted = Submission()
        future = asyncio.run_coroutine_threadsafe(submitted.running(coro), self.loop)
        try:
            return future.result(timeout)
        except KeyboardInterrupt:
            if not submitted.answers:
                _stop(future, grace)
                raise
        except concurrent.futures.TimeoutError:
            _stop(future, grace)
            raise
        submitted.interrupt(self.loop)
        return _answer(future)

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await a coroutine on this loop from any event loop (the async API). Cancelled, it is
        cancelled; or, if it answers interrupts, its answer is returned (see ``interrupts.py``)."""
        if self.on_loop():
            return await coro
        submitted = Submission()
        waiting = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(submitted.running(coro), self.loop))
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            if waiting.cancelled() or not submitted.answers:
                waiting.cancel()
                raise
        submitted.interrupt(self.loop)
        result, _ = await uninterrupted(waiting)
        taken_back()  # answered: the caller's task is not cancelling any more
        return result

    def spawn(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start a coroutine on the loop without waiting."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def spawn_if_running(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T] | None:
        """Start a coroutine on the loop if it is running now, else drop it (None): for clean-up
        from ``__del__``, which must never start a loop thread (at interpreter exit a new thread
        never starts, and waiting for it hangs the exit)."""
        with self._start_lock:
            loop = self._loop
            if loop is None or loop.is_closed() or not loop.is_running() or sys.is_finalizing():
                coro.close()
                return None
            return asyncio.run_coroutine_threadsafe(coro, loop)

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        """A synchronous iterator over an async generator that runs on the loop."""
        try:
            while True:
                try:
                    item: T = self.run(agen.__anext__())  # type: ignore[arg-type]
                except StopAsyncIteration:
                    return
                yield item
        finally:
            if getattr(agen, "aclose", None) is not None and not self.loop_closed():
                self.run(aclose_when_idle(agen))

    def stop(self, shutdown: Coroutine[Any, Any, None]) -> Exception | None:
        """Run ``shutdown`` on the loop, cancel what still runs there, and end the thread. Does
        nothing when the loop is not running (``shutdown`` is dropped). Stopping must not raise over
        a broken connection, so an error of ``shutdown`` is returned for the owner to log."""
        if self.loop_closed():
            shutdown.close()
            return None
        if self.on_loop():
            shutdown.close()
            raise RuntimeError("close() from the connection's own event loop")
        loop = self.loop

        async def last() -> None:
            await shutdown
            await _cancel_leftovers()

        failed: Exception | None = None
        try:
            asyncio.run_coroutine_threadsafe(last(), loop).result(timeout=15)
        except Exception as exc:  # returned, not raised: see the docstring
            failed = exc
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
        loop.close()
        return failed


async def aclose_when_idle(agen: Any, patience: float = 10.0) -> None:
    """Close an async generator once its step in progress has ended: after an interrupted cell,
    ``run`` cancels that step, but the cancellation unwinds on the loop a little later, and closing
    a generator still running raises RuntimeError instead of closing it."""
    deadline = time.monotonic() + patience
    while getattr(agen, "ag_running", False) and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    await agen.aclose()


async def _cancel_leftovers(grace: float = 5.0) -> None:
    """Cancel what still runs on the loop (lock renewers, scheduled abandons) and let it finish."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=grace)
        if pending:
            log.info("closing: %d tasks did not stop within %.0f s", len(pending), grace)


def _stop(future: concurrent.futures.Future[Any], grace: float) -> None:
    """An interrupted cell stops the work instead of leaving it running (``grace``: see ``run``)."""
    future.cancel()
    if grace:
        concurrent.futures.wait([future], timeout=grace)


def _answer(future: concurrent.futures.Future[T]) -> T:
    """What an interrupted operation that answers interrupts returns, once its steps in flight
    have ended. A second interrupt meanwhile cannot cut a step in two: it is logged, and waited out."""
    while True:
        try:
            return future.result()
        except KeyboardInterrupt:
            log.warning("interrupted again: still finishing what was in flight (a step is never cut in two)")
        except concurrent.futures.CancelledError:
            raise KeyboardInterrupt from None  # cancelled before it could answer: nothing to show


def stop_if_cancelled() -> None:
    """Raise ``CancelledError`` in a task that was cancelled but goes on.

    On Python 3.11 (Databricks 15.4 LTS), ``asyncio.wait_for``, which the SDK awaits in every receive
    and frame read, returns the inner result when a cancellation lands as that result arrives: the
    task is marked as cancelling, yet runs on. An interrupted cell would then keep moving or removing
    messages to the end. The kit's long loops call this at the top of each round (3.12 does not lose
    the cancellation; there this never raises for a task that was not cancelled)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
