"""Sends and receives through the real SDK. Each test names the Service Bus rule it checks."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusMessageBatch,
)
from azure.servicebus import ServiceBusReceiveMode as Mode
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType
from azure.servicebus.exceptions import MessageSizeExceededError, MessagingEntityNotFoundError

from tests.helpers import drain, send


def test_received_message_carries_every_field_the_sender_set(client: ServiceBusClient) -> None:
    """Rule: properties, application properties and body travel unchanged; the broker adds
    sequence number, enqueued time, lock and a delivery count of 0 on first delivery."""
    fields: dict[str, Any] = {
        "content_type": "application/json",
        "subject": "order-created",
        "correlation_id": "corr-1",
        "message_id": "m-1",
        "to": "someone",
        "reply_to": "replies",
        "partition_key": "pk",
        "time_to_live": dt.timedelta(minutes=5),
    }
    properties = {"str": "x", "int": 7, "float": 1.5, "bool": True}
    sent = ServiceBusMessage('{"order": 1}', application_properties=properties, **fields)
    before = dt.datetime.now(dt.UTC)
    with client.get_queue_sender("q") as sender:
        sender.send_messages(sent)
    with client.get_queue_receiver("q", max_wait_time=5) as receiver:
        (msg,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert str(msg) == '{"order": 1}'
        assert {name: getattr(msg, name) for name in fields} == fields  # every field as sent
        # The SDK itself decodes AMQP strings in application properties to bytes.
        assert msg.application_properties == {b"str": b"x", b"int": 7, b"float": 1.5, b"bool": True}
        assert msg.delivery_count == 0
        assert msg.sequence_number >= 1
        assert msg.enqueued_time_utc is not None
        assert before - dt.timedelta(seconds=1) <= msg.enqueued_time_utc <= dt.datetime.now(dt.UTC)
        assert isinstance(msg.lock_token, uuid.UUID)
        remaining = (msg.locked_until_utc - dt.datetime.now(dt.UTC)).total_seconds()
        assert 25 < remaining <= 31  # the queue's LockDuration is PT30S
        receiver.complete_message(msg)


def test_batch_envelope_is_unpacked_into_separate_messages_in_order(client: ServiceBusClient) -> None:
    """Rule: a batch (message-format 0x80013700) is one transfer holding many messages."""
    with client.get_queue_sender("q") as sender:
        batch: ServiceBusMessageBatch = sender.create_message_batch()
        for i in range(5):
            batch.add_message(ServiceBusMessage(f"m{i}", application_properties={"i": i}))
        sender.send_messages(batch)
        sender.send_messages([ServiceBusMessage("list-a"), ServiceBusMessage("list-b")])
    got = drain(client, "q")
    assert [str(m) for m in got] == ["m0", "m1", "m2", "m3", "m4", "list-a", "list-b"]
    assert [m.application_properties[b"i"] for m in got[:5]] == [0, 1, 2, 3, 4]
    seqs = [m.sequence_number for m in got]
    assert seqs == sorted(seqs) and len(set(seqs)) == 7


def test_binary_and_value_bodies_survive_byte_for_byte(client: ServiceBusClient) -> None:
    """Rule: data bodies stay data (bytes), amqp-value bodies stay values."""
    raw = bytes(range(256))
    with client.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage(raw))
        sender.send_messages(AmqpAnnotatedMessage(value_body={"k": [1, 2, 3]}))
    first, second = drain(client, "q", count=2)
    assert b"".join(first.body) == raw
    assert first.body_type == AmqpMessageBodyType.DATA
    assert second.body_type == AmqpMessageBodyType.VALUE
    assert second.body == {b"k": [1, 2, 3]}


def test_oversize_message_is_refused_with_a_tracking_id(quick_client: ServiceBusClient) -> None:
    """Rule: messages over the entity's size limit get amqp:link:message-size-exceeded."""
    with quick_client.get_queue_sender("tiny") as sender, pytest.raises(MessageSizeExceededError) as err:
        sender.send_messages(ServiceBusMessage(b"x" * 8000))
    assert "TrackingId:" in str(err.value)
    assert drain(quick_client, "tiny") == []


def test_standard_tier_limit_is_256_kb(quick_client: ServiceBusClient) -> None:
    """Rule: Standard tier caps a message at 256 KB; just under it is accepted."""
    with quick_client.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage(b"y" * 200_000))
        with pytest.raises(MessageSizeExceededError):
            sender.send_messages(ServiceBusMessage(b"y" * 300_000))
    (msg,) = drain(quick_client, "q", count=1)
    assert len(b"".join(msg.body)) == 200_000


def test_unknown_entity_is_reported_as_not_found(quick_client: ServiceBusClient) -> None:
    """Rule: attaching to a missing entity fails with amqp:not-found."""
    with pytest.raises(MessagingEntityNotFoundError), quick_client.get_queue_sender("no-such-queue") as sender:
        sender.send_messages(ServiceBusMessage("x"))
    with pytest.raises(MessagingEntityNotFoundError):
        with quick_client.get_queue_receiver("no-such-queue", max_wait_time=1) as receiver:
            receiver.receive_messages(max_wait_time=1)


def test_entity_names_are_case_insensitive(client: ServiceBusClient) -> None:
    """Rule: Service Bus entity names are case-insensitive."""
    send(client, "Q", "upper")
    assert [str(m) for m in drain(client, "q")] == ["upper"]


def test_receive_and_delete_removes_on_delivery(client: ServiceBusClient) -> None:
    """Rule: receive-and-delete settles on send; the message is gone, nothing to complete."""
    send(client, "q", "a", "b")
    with client.get_queue_receiver("q", receive_mode=Mode.RECEIVE_AND_DELETE, max_wait_time=3) as r:
        got = r.receive_messages(max_message_count=10, max_wait_time=3)
    assert sorted(str(m) for m in got) == ["a", "b"]
    with client.get_queue_receiver("q") as r:
        assert r.peek_messages(max_message_count=10, sequence_number=1) == []


def test_credit_is_honoured(client: ServiceBusClient) -> None:
    """Rule: the broker sends no more messages than the receiver's link credit."""
    send(client, "q", *[f"m{i}" for i in range(6)])
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        got = r.receive_messages(max_message_count=2, max_wait_time=3)
        assert len(got) == 2
        for m in got:
            r.complete_message(m)
    assert len(drain(client, "q")) == 4


def test_competing_receivers_never_get_the_same_message(client: ServiceBusClient) -> None:
    """Rule: a peek-locked message is invisible to other receivers."""
    send(client, "q", *[f"m{i}" for i in range(10)])
    with (
        client.get_queue_receiver("q", max_wait_time=2) as r1,
        client.get_queue_receiver("q", max_wait_time=2) as r2,
    ):
        a = r1.receive_messages(max_message_count=5, max_wait_time=30)
        b = r2.receive_messages(max_message_count=10, max_wait_time=30)
        assert {m.sequence_number for m in a}.isdisjoint({m.sequence_number for m in b})
        assert len(a) + len(b) == 10


async def test_async_client_sends_receives_and_completes(emulator) -> None:  # type: ignore[no-untyped-def]
    """Rule: the async SDK speaks the same protocol."""
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    async with AsyncClient.from_connection_string(emulator.connection_string) as c:
        async with c.get_queue_sender("q") as s:
            await s.send_messages([ServiceBusMessage("async-1"), ServiceBusMessage("async-2")])
        async with c.get_queue_receiver("q", max_wait_time=3) as r:
            got = await r.receive_messages(max_message_count=2, max_wait_time=3)
            assert sorted(str(m) for m in got) == ["async-1", "async-2"]
            for m in got:
                await r.complete_message(m)
            assert await r.peek_messages(max_message_count=5, sequence_number=1) == []


def test_batch_limit_is_advertised_to_the_sdk(quick_client: ServiceBusClient) -> None:
    """Rule: the broker advertises the entity's limit (max-message-size and
    com.microsoft:max-message-batch-size); the SDK sizes batches from it."""
    with quick_client.get_queue_sender("tiny") as sender:
        batch = sender.create_message_batch()
        assert batch.max_size_in_bytes == 4096
        with pytest.raises(MessageSizeExceededError):
            batch.add_message(ServiceBusMessage(b"x" * 5000))
