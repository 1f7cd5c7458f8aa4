"""Message sections as Service Bus delivers them: delivery annotations, empty bodies, batches,
annotation value types."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage
from azure.servicebus import ServiceBusReceiveMode as Mode
from azure.servicebus.amqp import AmqpAnnotatedMessage

from sbnotebook.emulator import Emulator
from tests.helpers import drain

pytestmark = pytest.mark.timeout(120)
LOCK_TOKEN = b"x-opt-lock-token"


def _receive(client: ServiceBusClient, n: int, queue: str = "q") -> list[ServiceBusReceivedMessage]:
    got: list[ServiceBusReceivedMessage] = []
    with client.get_queue_receiver(queue, max_wait_time=5) as r:
        while len(got) < n:
            batch = r.receive_messages(max_message_count=n - len(got), max_wait_time=5)
            assert batch, f"only {len(got)} of {n} messages arrived"
            got += batch
        for m in got:
            r.complete_message(m)
    return got


# ------------------------------------------------------------ #1 lock token


def test_peek_lock_deliveries_carry_the_lock_token_in_delivery_annotations(client: ServiceBusClient) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages(ServiceBusMessage("x"))
    with client.get_queue_receiver("q", max_wait_time=5) as r:
        (m,) = r.receive_messages(max_wait_time=5)
        da = m.raw_amqp_message.delivery_annotations
        assert da is not None and da[LOCK_TOKEN] == uuid.UUID(str(m.lock_token))
        r.complete_message(m)


def test_receive_and_delete_and_peek_carry_no_lock_token(client: ServiceBusClient) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages([ServiceBusMessage("x"), ServiceBusMessage("y")])
    with client.get_queue_receiver("q") as r:
        (peeked,) = r.peek_messages(max_message_count=1, sequence_number=1)
        assert LOCK_TOKEN not in (peeked.raw_amqp_message.delivery_annotations or {})
    (m, _) = drain(client, "q")
    assert LOCK_TOKEN not in (m.raw_amqp_message.delivery_annotations or {})


# ------------------------------------------------- #2 sender's delivery annotations


def test_sender_delivery_annotations_are_delivered(client: ServiceBusClient) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages(AmqpAnnotatedMessage(data_body=b"b", delivery_annotations={"custom": "v", "n": 5}))
    (m,) = _receive(client, 1)
    da = m.raw_amqp_message.delivery_annotations
    assert da is not None
    assert (da[b"custom"], da[b"n"]) == (b"v", 5)
    assert LOCK_TOKEN in da


# --------------------------------------------------------------- #3 batches


def test_list_with_delivery_annotations_arrives_as_separate_messages(client: ServiceBusClient) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages(
            [
                ServiceBusMessage("a"),
                AmqpAnnotatedMessage(data_body=b"b", delivery_annotations={"k": "v"}),
                ServiceBusMessage("c"),
            ]
        )
    got = _receive(client, 3)
    assert [str(m) for m in got] == ["a", "b", "c"]
    assert (got[1].raw_amqp_message.delivery_annotations or {})[b"k"] == b"v"


def test_message_batch_with_delivery_annotations(client: ServiceBusClient) -> None:
    with client.get_queue_sender("q") as s:
        batch = s.create_message_batch()
        batch.add_message(AmqpAnnotatedMessage(data_body=b"one", delivery_annotations={"k": 1}))
        batch.add_message(ServiceBusMessage("two"))
        batch.add_message(ServiceBusMessage(None))
        s.send_messages(batch)
    got = _receive(client, 3)
    assert [m.body if m.body is None else str(m) for m in got] == ["one", "two", None]


def test_async_delivery_annotations_and_batches(emulator: Emulator) -> None:
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    async def run() -> list[tuple[str, dict[bytes, object]]]:
        async with AsyncClient.from_connection_string(emulator.connection_string) as c:
            async with c.get_queue_sender("q") as s:
                await s.send_messages(AmqpAnnotatedMessage(data_body=b"w", delivery_annotations={"k": "v"}))
                batch = await s.create_message_batch()
                batch.add_message(AmqpAnnotatedMessage(data_body=b"x", delivery_annotations={"k": "v"}))
                batch.add_message(ServiceBusMessage("y"))
                await s.send_messages(batch)
            async with c.get_queue_receiver("q", max_wait_time=5) as r:
                got = await r.receive_messages(max_message_count=5, max_wait_time=5)
                for m in got:
                    await r.complete_message(m)
                return [(str(m), dict(m.raw_amqp_message.delivery_annotations or {})) for m in got]

    got = asyncio.run(run())
    assert [body for body, _ in got] == ["w", "x", "y"]
    assert got[0][1][b"k"] == b"v"
    assert all(LOCK_TOKEN in da for _, da in got)


# ------------------------------------------------------------- #5 no body


def test_message_without_a_body_is_stored_and_delivered(client: ServiceBusClient) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages(ServiceBusMessage(None, application_properties={"k": 1}))
    (m,) = _receive(client, 1)
    assert m.body is None
    assert m.application_properties == {b"k": 1}


def test_message_without_a_body_async(emulator: Emulator) -> None:
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    async def run() -> object:
        async with AsyncClient.from_connection_string(emulator.connection_string) as c:
            async with c.get_queue_sender("q") as s:
                await s.send_messages(ServiceBusMessage(None))
            async with c.get_queue_receiver("q", receive_mode=Mode.RECEIVE_AND_DELETE, max_wait_time=5) as r:
                (m,) = await r.receive_messages(max_wait_time=5)
                return m.body

    assert asyncio.run(run()) is None


# ------------------------------------------------- #8 annotation value types


def test_resent_message_keeps_its_partition_key(client: ServiceBusClient) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages(ServiceBusMessage("a", partition_key="pk"))
    with client.get_queue_receiver("q", max_wait_time=5) as r:
        (m,) = r.receive_messages(max_wait_time=5)
        with client.get_queue_sender("q") as s:
            s.send_messages(m)  # the SDK re-sends the partition key as AMQP binary
        r.complete_message(m)
    (again,) = _receive(client, 1)
    assert again.partition_key == "pk"


def test_binary_annotation_values_stay_binary(client: ServiceBusClient) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages(
            AmqpAnnotatedMessage(data_body=b"x", annotations={"x-opt-partition-key": b"\xff\x00", "custom": b"\x01"})
        )
    (m,) = _receive(client, 1)
    ann = m.raw_amqp_message.annotations
    assert ann[b"x-opt-partition-key"] == b"\xff\x00"
    assert ann[b"custom"] == b"\x01"


def test_a_batch_whose_section_is_not_a_message_is_refused_not_merged() -> None:
    """Rule: batch unpacking never silently turns N messages into 1."""
    from proton import Data

    from sbnotebook.emulator.amqp.codec import DecodeError, decode_transfer

    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(0x75)
    d.put_binary(b"not an AMQP message")
    d.exit()
    with pytest.raises(DecodeError):
        decode_transfer(d.encode() * 2, batch=True)
    assert len(decode_transfer(d.encode() * 2)) == 1  # not marked as a batch: one plain message


def test_resent_message_keeps_its_partition_key_async(emulator: Emulator) -> None:
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    async def run() -> str | None:
        async with AsyncClient.from_connection_string(emulator.connection_string) as c:
            async with c.get_queue_sender("q") as s:
                await s.send_messages(ServiceBusMessage("a", partition_key="pk"))
                async with c.get_queue_receiver("q", max_wait_time=5) as r:
                    (m,) = await r.receive_messages(max_wait_time=5)
                    await s.send_messages(m)  # binary partition key on the wire
                    await r.complete_message(m)
                    (again,) = await r.receive_messages(max_wait_time=5)
                    await r.complete_message(again)
                    return again.partition_key

    assert asyncio.run(run()) == "pk"
