"""A message's journey through the broker, driven by the real SDK: deliveries counted as Service Bus
counts them, a poison message dead-lettered at its MaxDeliveryCount, a lock expiry, a time-to-live
expiry and a forward each an event of their own (the manual clock moves time, never a sleep)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage

from sbnotebook.emulator import Emulator
from sbnotebook.emulator.journey.log import MAX_EVENTS, JourneyLog
from sbnotebook.emulator.journey.queries import JourneyAnswer, JourneyQueryError

from ...helpers import QuickCloseClient, emulator_config

TOPOLOGY = emulator_config(
    "journeys",
    {
        "poison": {"LockDuration": "PT5M", "MaxDeliveryCount": 3},
        "locks": {"LockDuration": "PT30S"},
        "ttl-dl": {"DefaultMessageTimeToLive": "PT1M", "DeadLetteringOnMessageExpiration": True},
        "fwd-src": {"ForwardTo": "fwd-dst"},
        "fwd-dst": {"LockDuration": "PT5M"},
    },
)
WAIT = 30  # seconds a receive may wait for a message that is there (only a hang takes longer)


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(TOPOLOGY, clock="manual") as e:
        yield e


@pytest.fixture
def sb(emu: Emulator) -> Iterator[ServiceBusClient]:
    with QuickCloseClient.from_connection_string(emu.connection_string) as c:
        yield c


def shape(answer: JourneyAnswer) -> list[tuple[Any, ...]]:
    """Each event as (event, where, delivery count, reason, where it went)."""
    return [(e["event"], e["entity"], e["delivery_count"], e["reason"], e["to"]) for e in answer.events]


def send(sb: ServiceBusClient, queue: str, message_id: str) -> None:
    with sb.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("x", message_id=message_id))


def receive_one(sb: ServiceBusClient, queue: str) -> tuple[Any, ServiceBusReceivedMessage]:
    receiver = sb.get_queue_receiver(queue)
    receiver.__enter__()
    got = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
    assert len(got) == 1
    return receiver, got[0]


def test_a_poison_message_is_delivered_max_delivery_count_times_then_dead_lettered(
    emu: Emulator, sb: ServiceBusClient
) -> None:
    send(sb, "poison", "p1")
    send(sb, "poison", "healthy")
    seen = []
    with sb.get_queue_receiver("poison") as receiver:
        for _ in range(3):
            # p1 is the oldest available each time: abandoned, it is first in line again
            (msg,) = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
            assert msg.message_id == "p1"
            seen.append(msg.delivery_count)
            receiver.abandon_message(msg)
    journey = emu.journey("poison", message_id="p1")
    expected = [("accepted", "poison", None, None, None)]
    for n in (1, 2, 3):
        expected += [("delivered", "poison", n, None, None), ("abandoned", "poison", n, None, None)]
    expected.append(("dead_lettered", "poison", 3, "MaxDeliveryCountExceeded", "poison/$DeadLetterQueue"))
    assert shape(journey) == expected
    # The Python SDK's delivery_count (the AMQP header) is one less than Service Bus's count
    assert seen == [0, 1, 2]
    events = journey.events
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
    delivered = [e for e in events if e["event"] == "delivered"]
    assert len({e["lock_token"] for e in delivered}) == 3 and all(e["lock_token"] for e in delivered)
    # The same journey read from the dead-letter queue, by sequence number
    seq = events[0]["sequence_number"]
    assert shape(emu.journey("poison/$DeadLetterQueue", sequence_number=seq)) == expected
    # ...and the check tells journeys apart: the healthy message's is not this one
    assert shape(emu.journey("poison", message_id="healthy")) != expected
    assert shape(emu.journey("poison", message_id="healthy"))[0] == ("accepted", "poison", None, None, None)


def test_a_lock_expiry_is_an_event_and_the_next_delivery_counts_it(emu: Emulator, sb: ServiceBusClient) -> None:
    send(sb, "locks", "l1")
    receiver, msg = receive_one(sb, "locks")
    token = str(msg.lock_token)
    try:
        emu.advance(31)
    finally:
        receiver.__exit__(None, None, None)
    with sb.get_queue_receiver("locks") as again:
        second = again.receive_messages(max_message_count=1, max_wait_time=WAIT)[0]
        assert second.delivery_count == 1
        again.complete_message(second)
    events = emu.journey("locks", message_id="l1").events
    assert [(e["event"], e["delivery_count"]) for e in events] == [
        ("accepted", None),
        ("delivered", 1),
        ("lock_expired", 1),
        ("delivered", 2),
        ("completed", 2),
    ]
    assert events[2]["lock_token"] == token
    assert (events[2]["time"] - events[1]["time"]).total_seconds() == pytest.approx(30)


def test_a_ttl_expiry_is_an_event_then_a_dead_letter(emu: Emulator, sb: ServiceBusClient) -> None:
    send(sb, "ttl-dl", "t1")
    emu.advance(61)
    assert shape(emu.journey("ttl-dl", message_id="t1")) == [
        ("accepted", "ttl-dl", None, None, None),
        ("expired", "ttl-dl", None, None, None),
        ("dead_lettered", "ttl-dl", None, "TTLExpiredException", "ttl-dl/$DeadLetterQueue"),
    ]


def test_a_forward_is_an_event_and_the_journey_follows_it(emu: Emulator, sb: ServiceBusClient) -> None:
    send(sb, "fwd-src", "f1")
    receiver, msg = receive_one(sb, "fwd-dst")
    receiver.complete_message(msg)
    receiver.__exit__(None, None, None)
    expected = [
        ("accepted", "fwd-src", None, None, None),
        ("forwarded", "fwd-src", None, None, "fwd-dst"),
        ("enqueued", "fwd-dst", None, None, None),
        ("delivered", "fwd-dst", 1, None, None),
        ("completed", "fwd-dst", 1, None, None),
    ]
    assert shape(emu.journey("fwd-src", message_id="f1")) == expected
    assert shape(emu.journey("fwd-dst", message_id="f1")) == expected
    assert emu.journey("fwd-dst", message_id="f1").events[2]["came_from"] == "fwd-src"


def test_the_log_is_bounded_and_says_what_it_dropped() -> None:
    assert MAX_EVENTS == 100_000
    log = JourneyLog(capacity=3)
    for n in range(5):
        log.note(float(n), "accepted", "q", n, f"m{n}")
    assert [e.message_id for e in log.events()] == ["m2", "m3", "m4"]
    assert log.dropped == 2
    assert [e.number for e in log.events()] == [3, 4, 5]
    with pytest.raises(ValueError):
        JourneyLog(capacity=0)


@pytest.mark.parametrize(
    "ask",
    [
        {},
        {"message_id": "a", "sequence_number": 1},
        {"message_id": ""},
        {"message_id": "x" * 129},
        {"sequence_number": -1},
        {"trace_id": "not-a-trace-id"},
        {"message_id": "a", "limit": 0},
        {"message_id": "a", "limit": MAX_EVENTS + 1},
    ],
)
def test_a_journey_asked_wrongly_is_refused(emu: Emulator, ask: dict[str, Any]) -> None:
    with pytest.raises(JourneyQueryError):
        emu.journey("poison", **ask)
