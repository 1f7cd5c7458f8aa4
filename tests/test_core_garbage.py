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


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _gone(ref: weakref.ref[object], within: float = 5.0) -> bool:
    """Whether the object is freed within ``within`` seconds (the renewer's cancellation runs on the
    connection's loop thread)."""
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
    batch = core.receive("q", count=2, connection=conn)
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
    dead = core.receive("q", count=200, connection=conn)
    dead.dead_letter(reason="test").raise_for_failures()
    dead.close()
    del dead
    before = _received_messages_alive()
    report = core.resubmit("q/$deadletterqueue", target="q", batch_size=20, max_in_flight=4, connection=conn)
    assert report.count("resubmitted") == 200
    deadline = time.monotonic() + 5
    while _received_messages_alive() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _received_messages_alive() <= before
