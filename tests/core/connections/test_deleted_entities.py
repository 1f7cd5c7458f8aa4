"""The kit's pooled links after their entity is deleted and made again under the same name: the broker
detaches them (as Service Bus does), and the next call opens new ones, on the same live connection."""

from __future__ import annotations

import time

import pytest
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook import core
from sbnotebook.emulator import Emulator

BOUND = 20.0  # seconds for the calls after the re-creation (a link left on the old queue waits out its 5 s)


def test_a_queue_deleted_and_made_again_is_reached_by_the_next_calls(
    emulator: Emulator, admin: ServiceBusAdministrationClient
) -> None:
    """Rule: send, peek and receive after the queue is deleted and made again reach the new queue: the
    message sent after the re-creation is the one received, by the pooled links of the same connection."""
    with core.connect(emulator.connection_string) as conn:
        core.send("q", ["old"], connection=conn)
        assert len(core.peek("q", connection=conn)) == 1
        with core.receive("q", max_messages=1, wait_seconds=5, connection=conn) as batch:
            assert batch.complete().count("completed") == 1
        conn.settle()  # the warm-up done: the pools hold the links attached to the old queue
        opened, generation = conn.links_opened, conn.generation
        admin.delete_queue("q")
        admin.create_queue("q")
        started = time.monotonic()
        assert core.send("q", ["after"], connection=conn).count("sent") == 1
        assert emulator.broker.counts("q")["active"] == 1  # in the queue made again
        assert [m["sequence_number"] for m in core.peek("q", connection=conn)] == [1]  # numbered from 1 again
        with core.receive("q", max_messages=1, wait_seconds=5, connection=conn) as batch:
            assert [r["body_text"] for r in batch.records] == ["after"]
            assert batch.complete().count("completed") == 1
        assert time.monotonic() - started < BOUND
        assert conn.links_opened > opened  # new links, on the same connection
        assert conn.generation == generation  # no reconnect: the same SDK client and connection
    assert emulator.broker.counts("q")["active"] == 0


def test_a_queue_deleted_and_not_made_again_is_not_found(
    emulator: Emulator, admin: ServiceBusAdministrationClient
) -> None:
    """Rule: the one retry on a new link meets the broker's refusal: EntityNotFoundError, not a wait."""
    with core.connect(emulator.connection_string) as conn:
        core.send("q", ["old"], connection=conn)
        with core.receive("q", max_messages=1, wait_seconds=5, connection=conn) as batch:
            batch.complete()
        admin.delete_queue("q")
        started = time.monotonic()
        with pytest.raises(core.EntityNotFoundError):
            core.receive("q", max_messages=1, wait_seconds=30, connection=conn)
        with pytest.raises(core.EntityNotFoundError):
            core.peek("q", connection=conn)
        assert time.monotonic() - started < BOUND
