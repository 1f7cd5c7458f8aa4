"""One delivery count, Service Bus's (docs/glossary.md, "Delivery count"): a received message counts
the delivery under way (the first is 1), a peeked one the deliveries that failed so far, as .NET's
``ServiceBusReceivedMessage.DeliveryCount`` shows them. The AMQP header the emulator sends is read
apart from the kit (the SDK's ``delivery_count``: the failed deliveries before this one, on receive
and on peek alike), and a message dead-lettered for ``MaxDeliveryCountExceeded`` at a maximum of N
shows N in its record, its export line and its journey."""

from __future__ import annotations

import json
from pathlib import Path

from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook.emulator import Emulator

MAX = 3  # the suite's "short" queue: MaxDeliveryCount 3, a 1 s lock


def test_a_message_dead_lettered_at_max_delivery_count_n_shows_n_everywhere(
    emulator: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    cs = emulator.connection_string
    core.send("short", ["poison"], connection=cs)
    seen, headers = [], []
    for _ in range(MAX):
        with core.receive("short", max_messages=1, wait_seconds=5, connection=cs) as batch:
            seen.append(batch.records[0]["delivery_count"])
            headers.append(batch.messages[0].delivery_count)  # the AMQP header, as the SDK reads it
            batch.abandon()
    assert seen == [1, 2, 3] and headers == [0, 1, 2]  # the delivery under way; the failed ones before it
    assert emulator.broker.counts("short")["dead_letter"] == 1

    dlq = core.EntityPath("short").dead_letter
    with client.get_queue_receiver("short", sub_queue="deadletter") as receiver:
        (peeked,) = receiver.peek_messages(max_message_count=1)
    assert peeked.delivery_count == MAX  # what the broker sends on a peek: the failed deliveries
    (record,) = core.peek(dlq, connection=cs).records
    assert record["delivery_count"] == MAX and record["dead_letter_reason"] == "MaxDeliveryCountExceeded"

    export = tmp_path / "dlq.jsonl"
    core.export_jsonl(dlq, export, connection=cs)
    (line,) = [json.loads(x) for x in export.read_text().splitlines()]
    assert line["delivery_count"] == MAX

    events = core.journey(dlq, sequence_number=record["sequence_number"], connection=cs).rows
    delivered = [e["delivery_count"] for e in events if e["event"] == "delivered"]
    (dead,) = [e for e in events if e["event"] == "dead_lettered"]
    assert delivered == seen and dead["delivery_count"] == MAX


def test_a_fresh_message_peeks_0_and_is_received_as_its_first_delivery(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("q", ["fresh"], connection=cs)
    (peeked,) = core.peek("q", connection=cs).records
    assert peeked["delivery_count"] == 0
    with core.receive("q", max_messages=1, wait_seconds=5, connection=cs) as batch:
        assert batch.records[0]["delivery_count"] == 1 and batch.messages[0].delivery_count == 0
        batch.complete()
