"""What the emulator admits of a send, at the byte and at the message: the transfer counts whole
against the link's limit (a batch's envelope and the ids it copies from its first message
included), as Service Bus's AMQP layer counts it; a batch holds at most 4,500 messages. Each
boundary is met from both sides with the real SDK (docs/emulator.md, "A batch's size").
"""

from __future__ import annotations

import uuid

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusMessageBatch
from azure.servicebus._common.utils import transform_outbound_messages
from azure.servicebus._pyamqp._encode import encode_payload
from azure.servicebus._pyamqp.message import BatchMessage
from azure.servicebus._transport._pyamqp_transport import PyamqpTransport
from azure.servicebus.amqp import AmqpAnnotatedMessage
from azure.servicebus.exceptions import MessageSizeExceededError, ServiceBusError
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook.emulator.amqp.terms import MAX_BATCH_MESSAGES
from tests.helpers import drain

LIMIT = 256 * 1024  # queue "q": the Standard tier's largest message, its link's max-message-size
BODY = 1000  # the body of every message but the last, which is cut to reach the size asked for


def transfer_size(batch: ServiceBusMessageBatch) -> int:
    """The bytes the SDK transfers for ``batch``: its envelope with every message, encoded."""
    out = bytearray()
    encode_payload(out, BatchMessage(*batch._message))
    return len(out)


def message(n: int, length: int = BODY) -> ServiceBusMessage:
    return ServiceBusMessage("x" * length, message_id=str(uuid.UUID(int=n)))  # ids of one length


def encoded(msg: ServiceBusMessage) -> int:
    """A message's bytes alone, as the SDK encodes it to send it."""
    outgoing = transform_outbound_messages(msg, ServiceBusMessage, PyamqpTransport.to_outgoing_amqp_message)
    return int(PyamqpTransport.get_message_encoded_size(outgoing._message))


def batch_of(size: int) -> ServiceBusMessageBatch:
    """A batch that transfers exactly ``size`` bytes: messages of BODY letters, the last one cut.
    Built with room to spare (the SDK's own limit would stop it short of the link's)."""
    batch = ServiceBusMessageBatch(max_size_in_bytes=2 * LIMIT, amqp_transport=PyamqpTransport)
    while batch.size_in_bytes < size - 3 * BODY:
        batch.add_message(message(len(batch)))
    left = size - transfer_size(batch)
    # A message of more than 255 bytes costs its bytes and 8 more in the envelope (a data section).
    last = BODY + left - (encoded(message(0)) + 8)
    batch.add_message(message(len(batch), last))
    assert transfer_size(batch) == size
    return batch


def test_a_batch_that_transfers_the_links_limit_is_accepted_and_every_message_arrives(
    client: ServiceBusClient,
) -> None:
    batch = batch_of(LIMIT)
    with client.get_queue_sender("q") as sender:
        sender.send_messages(batch)
    got = drain(client, "q")
    assert [m.message_id for m in got] == [str(uuid.UUID(int=n)) for n in range(len(batch))]
    assert [len(b"".join(m.body)) for m in got][:-1] == [BODY] * (len(batch) - 1)


def test_one_byte_more_is_refused_whole_with_service_bus_error(quick_client: ServiceBusClient) -> None:
    with quick_client.get_queue_sender("q") as sender, pytest.raises(MessageSizeExceededError) as err:
        sender.send_messages(batch_of(LIMIT + 1))
    assert f"(size {LIMIT + 1} bytes) exceeds the limit ({LIMIT} bytes)" in str(err.value)
    assert drain(quick_client, "q") == []


def test_a_single_message_counts_whole_on_both_sides_of_the_limit(quick_client: ServiceBusClient) -> None:
    exact = message(1, BODY + LIMIT - encoded(message(1)))
    over = message(2, BODY + LIMIT + 1 - encoded(message(2)))
    assert (encoded(exact), encoded(over)) == (LIMIT, LIMIT + 1)
    with quick_client.get_queue_sender("q") as sender:
        sender.send_messages(exact)
        with pytest.raises(MessageSizeExceededError):
            sender.send_messages(over)
    assert [m.message_id for m in drain(quick_client, "q")] == [exact.message_id]


def test_a_batch_the_python_sdk_fills_is_refused_as_service_bus_refuses_it(quick_client: ServiceBusClient) -> None:
    """The SDK (7.15) sizes a batch, then copies its first message's id into the envelope: 3,048
    messages of 20 letters take 262,128 bytes by its count, and 262,184 on the wire. Service Bus's
    AMQP layer counts the wire (the .NET SDK reserves those bytes with the first message); so does
    the emulator."""
    with quick_client.get_queue_sender("q") as sender:
        batch = sender.create_message_batch()
        with pytest.raises(MessageSizeExceededError):
            while True:
                batch.add_message(ServiceBusMessage("x" * 20))
        assert batch.size_in_bytes <= batch.max_size_in_bytes == LIMIT < transfer_size(batch)
        with pytest.raises(MessageSizeExceededError, match=f"size {transfer_size(batch)} bytes"):
            sender.send_messages(batch)
    assert drain(quick_client, "q") == []


def empty_messages(count: int) -> ServiceBusMessageBatch:
    """``count`` messages of 5 bytes each (no id, an empty body): thousands fit in 256 KB, which the
    Python SDK admits (no link property tells it the service's count)."""
    batch = ServiceBusMessageBatch(max_size_in_bytes=LIMIT, amqp_transport=PyamqpTransport)
    for _ in range(count):
        batch.add_message(AmqpAnnotatedMessage(data_body=b""))
    return batch


def test_a_batch_holds_at_most_4500_messages_as_on_service_bus(
    quick_client: ServiceBusClient, admin: ServiceBusAdministrationClient
) -> None:
    """Azure/azure-service-bus#397: a batch of more than 4,500 messages is refused with the
    service's internal error, whatever its bytes; 4,500 go through."""
    assert MAX_BATCH_MESSAGES == 4500
    with quick_client.get_queue_sender("q") as sender:
        sender.send_messages(empty_messages(4500))
        with pytest.raises(ServiceBusError, match="unable to process the request") as err:
            sender.send_messages(empty_messages(4501))
    assert not isinstance(err.value, MessageSizeExceededError)
    assert admin.get_queue_runtime_properties("q").active_message_count == 4500
