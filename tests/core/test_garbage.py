"""Bulk work frees what it is done with at once (reference counting), not by the cycle collector.

A batch whose messages wait in a reference cycle is freed only by a full garbage collection, which
walks every object the process holds. In a 10^5 resubmit, closed batches waited that way (their
cancelled lock renewer's traceback held the batch): a full collection every 2-3 s, up to 270 ms
each, 6.8 s of the run's 61 s, each one stalling every batch in flight.
"""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusReceivedMessage

from sbnotebook import core
from sbnotebook.emulator import Emulator
from tests.waiting import HANG


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _gone(ref: weakref.ref[object], within: float = HANG) -> bool:
    """Whether the object is freed within ``within`` seconds (the renewer's cancellation runs on the
    connection's loop thread; the bound only ends a hang)."""
    deadline = time.monotonic() + within
    while ref() is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    return ref() is None


def _received_messages_alive() -> int:
    return sum(isinstance(o, ServiceBusReceivedMessage) for o in gc.get_objects())


def test_a_closed_batch_and_its_messages_are_freed_without_the_cycle_collector(
    emulator: Emulator, no_cycle_collector: None
) -> None:
    conn = emulator.connection_string
    core.send("q", ["a", "b"], connection=conn).raise_for_failures()
    batch = core.receive("q", max_messages=2, connection=conn)
    time.sleep(0.4)  # the lock renewer has started (it wakes every 0.25 s)
    batch.complete()
    batch.close()
    batch_ref, message_ref = weakref.ref(batch), weakref.ref(batch.messages[0])
    del batch
    assert _gone(batch_ref), "the closed batch is held by a reference cycle"
    assert _gone(message_ref)


def test_a_resubmit_leaves_no_message_waiting_for_the_cycle_collector(
    emulator: Emulator, no_cycle_collector: None
) -> None:
    conn = emulator.connection_string
    core.send("q", [f"m{i}" for i in range(200)], connection=conn).raise_for_failures()
    dead = core.receive("q", max_messages=200, connection=conn)
    dead.dead_letter(reason="test").raise_for_failures()
    dead.close()
    del dead
    before = _received_messages_alive()
    report = core.resubmit("q/$deadletterqueue", target="q", batch_size=20, max_in_flight=4, connection=conn)
    assert report.count("resubmitted") == 200
    deadline = time.monotonic() + HANG
    while _received_messages_alive() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _received_messages_alive() <= before


def test_a_batch_freed_while_the_loop_is_being_scheduled_on_does_not_deadlock(monkeypatch: pytest.MonkeyPatch) -> None:
    """``spawn_if_running`` holds the loop's start lock while it schedules; scheduling allocates, an
    allocation can run the cycle collector, and the collector can free a ``LockedBatch`` whose
    ``__del__`` calls ``spawn_if_running`` again, on the same thread: with a plain Lock that thread
    waited for itself forever (a 10^5 resubmit on the loop thread, then ``close_all`` waiting for the
    loop: tests/core/incidents/test_resumable_bulk.py hung until its 900 s timeout in ``nox -s dbr15``). Here the
    collector's part is played by dropping the last reference inside the scheduling call."""
    import asyncio
    import threading

    from sbnotebook.core.connections import loop as loop_module

    lt = loop_module.LoopThread("sbnotebook-test-reentrant")
    assert lt.loop.is_running() or _wait_running(lt)
    real = asyncio.run_coroutine_threadsafe

    class FreedBatch:  # what LockedBatch.__del__ does
        def __del__(self) -> None:
            lt.spawn_if_running(asyncio.sleep(0))

    held = [FreedBatch()]

    def scheduling(coro: object, loop: asyncio.AbstractEventLoop) -> object:
        held.clear()  # the collector runs here and frees a batch
        return real(coro, loop)  # type: ignore[arg-type]

    done = threading.Event()

    def spawn() -> None:
        lt.spawn_if_running(asyncio.sleep(0))
        done.set()

    monkeypatch.setattr(asyncio, "run_coroutine_threadsafe", scheduling)
    try:
        threading.Thread(target=spawn, daemon=True, name="sbnotebook-test-spawn").start()
        finished = done.wait(HANG)
    finally:
        monkeypatch.undo()
    assert finished, "spawn_if_running waited for itself (the thread holds the loop's start lock forever)"
    assert not held
    lt.stop(asyncio.sleep(0))


def _wait_running(lt: object, within: float = HANG) -> bool:
    deadline = time.monotonic() + within
    while not lt.loop.is_running():  # type: ignore[attr-defined]
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
