"""The record schema read straight from the AMQP sections (core/views/records.py ``to_record``) gives what
the SDK's own accessors give, for every kind of message a user meets."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage, ServiceBusReceiveMode
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType

from sbnotebook.core.views.records import RECORD_FIELDS, application_properties, body_bytes, body_text, to_record


def by_accessors(m: ServiceBusReceivedMessage, entity: str) -> dict[str, Any]:
    """The record as the SDK's public accessors describe the message."""

    def text(value: Any) -> str | None:
        return value.decode() if isinstance(value, bytes) else (None if value is None else str(value))

    def utc(value: dt.datetime | None) -> dt.datetime | None:
        return None if value is None else value.astimezone(dt.UTC)

    peeked = m._is_peeked_message
    raw = body_bytes(m)
    ttl = m.time_to_live
    return {
        "body_text": body_text(raw, m.content_type),
        "application_properties": application_properties(m.application_properties),
        "subject": m.subject,
        "message_id": text(m.message_id),
        "sequence_number": m.sequence_number,
        "enqueued_time": utc(m.enqueued_time_utc),
        "state": m.state.name.lower(),
        # Service Bus's count, as .NET shows it: the SDK's header count, one more for a received message.
        "delivery_count": None if m.delivery_count is None else m.delivery_count + (0 if peeked else 1),
        "dead_letter_reason": m.dead_letter_reason,
        "dead_letter_error_description": m.dead_letter_error_description,
        "dead_letter_source": m.dead_letter_source,
        "locked_until": None if peeked else utc(m.locked_until_utc),
        "lock_token": None if peeked or m.lock_token is None else str(m.lock_token),
        "session_id": m.session_id,
        "partition_key": m.partition_key,
        "correlation_id": text(m.correlation_id),
        "content_type": m.content_type,
        "to": m.to,
        "reply_to": m.reply_to,
        "time_to_live": ttl.total_seconds() if ttl else None,
        "scheduled_enqueue_time": utc(m.scheduled_enqueue_time_utc),
        "body": raw,
        "entity": entity,
    }


def full_message(i: int) -> ServiceBusMessage:
    return ServiceBusMessage(
        f'{{"order": {i}}}',
        message_id=f"m-{i}",
        correlation_id=f"c-{i}",
        subject="order",
        to="somewhere",
        reply_to="back",
        content_type="application/json",
        time_to_live=dt.timedelta(minutes=5),
        partition_key=f"pk-{i}",
        application_properties={
            "text": "é",
            "n": 7,
            "x": 1.5,
            "flag": True,
            "id": uuid.UUID(int=i),
            "when": dt.datetime(2026, 1, 2, tzinfo=dt.UTC),
        },
    )


def odd_bodies() -> list[Any]:
    return [
        ServiceBusMessage(b"\x00\x01binary"),
        AmqpAnnotatedMessage(value_body={"k": [1, 2]}),
        AmqpAnnotatedMessage(sequence_body=[[1, "a"]]),
        ServiceBusMessage("no properties at all"),
    ]


def test_records_match_the_sdk_accessors_for_every_kind_of_message(client: ServiceBusClient) -> None:
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    with client.get_queue_sender("q") as sender:
        sender.send_messages([full_message(i) for i in range(3)])
        sender.send_messages(odd_bodies())
        sender.schedule_messages(full_message(9), later)
    with client.get_queue_receiver("q", max_wait_time=5) as receiver:
        got = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        assert len(got) == 2
        receiver.defer_message(got[0])
        receiver.dead_letter_message(got[1], reason="bad", error_description="why")
        locked = receiver.receive_messages(max_message_count=5, max_wait_time=5)  # the 5 still active
        seen: list[tuple[ServiceBusReceivedMessage, str]] = [(m, "q") for m in locked]
        seen += [(m, "q") for m in receiver.peek_messages(max_message_count=50, sequence_number=1)]
    with client.get_queue_receiver("q", sub_queue="deadletter") as dlq:
        seen += [(m, "q/$deadletterqueue") for m in dlq.peek_messages(max_message_count=10)]
    with client.get_queue_sender("dl-fwd") as sender:  # dead-lettered there, forwarded with its source
        sender.send_messages(full_message(5))
    with client.get_queue_receiver("dl-fwd", max_wait_time=5) as receiver:
        for m in receiver.receive_messages(max_message_count=1, max_wait_time=5):
            receiver.abandon_message(m)
    with client.get_queue_receiver("dl-target", max_wait_time=5) as receiver:
        seen += [(m, "dl-target") for m in receiver.receive_messages(max_message_count=1, max_wait_time=5)]
    with client.get_queue_sender("sq60") as sender:
        sender.send_messages(ServiceBusMessage("in a session", session_id="s-1", partition_key="s-1"))
    with client.get_queue_receiver("sq60", session_id="s-1", max_wait_time=5) as receiver:
        seen += [(m, "sq60") for m in receiver.receive_messages(max_message_count=1, max_wait_time=5)]
    with client.get_queue_sender("once") as sender:
        sender.send_messages([full_message(7), ServiceBusMessage("plain")])
    with client.get_queue_receiver("once", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        seen += [(m, "once") for m in receiver.receive_messages(max_message_count=2, max_wait_time=5)]

    records = [(to_record(m, e), by_accessors(m, e)) for m, e in seen]
    for fast, reference in records:
        assert list(fast) == list(RECORD_FIELDS)
        assert fast == reference
    kinds = {(r["state"], r["lock_token"] is not None, r["dead_letter_reason"], r["session_id"]) for r, _ in records}
    assert {k[0] for k in kinds} == {"active", "deferred", "scheduled"}
    assert any(k[1] for k in kinds) and any(not k[1] for k in kinds)
    assert any(k[2] == "bad" for k in kinds) and any(k[3] == "s-1" for k in kinds)
    assert any(r["dead_letter_source"] == "dl-fwd" for r, _ in records)
    bodies = {r["body"] for r, _ in records}
    assert b"\x00\x01binary" in bodies and b'{"k": [1, 2]}' in bodies and b'[[1, "a"]]' in bodies
    # locked, peeked (deferred and scheduled among them), dead-lettered, forwarded, in a session, deleted
    assert len(seen) == 5 + 7 + 1 + 1 + 1 + 2
    assert {AmqpMessageBodyType.VALUE, AmqpMessageBodyType.SEQUENCE} <= {m.body_type for m, _ in seen}
