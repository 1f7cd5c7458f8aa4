"""Every other event of a journey, each from what causes it through the real SDK (or the kit, or
the emulator's own fault switch): scheduled then enqueued at its time, cancelled, a topic's fan-out,
a dropped duplicate, receive-and-delete, defer and the receive by sequence number, a renewed and a
lost lock, a dead letter forwarded, a batch delete."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode

from sbnotebook import core
from sbnotebook.emulator import Emulator

from ...helpers import QuickCloseClient, emulator_config

TOPOLOGY = emulator_config(
    "events",
    {
        "q": {"LockDuration": "PT5M"},
        "dedup": {"RequiresDuplicateDetection": True, "DuplicateDetectionHistoryTimeWindow": "PT10M"},
        "dl-fwd": {"MaxDeliveryCount": 1, "ForwardDeadLetteredMessagesTo": "dl-target"},
        "dl-target": {},
    },
    [{"Name": "t", "Properties": {}, "Subscriptions": [{"Name": "all", "Properties": {}}]}],
)
WAIT = 30


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(TOPOLOGY, clock="manual") as e:
        yield e
        core.close_all()


@pytest.fixture
def sb(emu: Emulator) -> Iterator[ServiceBusClient]:
    with QuickCloseClient.from_connection_string(emu.connection_string) as c:
        yield c


def events(emu: Emulator, entity: str, message_id: str) -> list[tuple[str, str]]:
    return [(e["event"], e["entity"]) for e in emu.journey(entity, message_id=message_id).events]


def test_scheduled_then_enqueued_at_its_time_and_a_cancelled_one(emu: Emulator, sb: ServiceBusClient) -> None:
    at = emu.now() + dt.timedelta(minutes=10)
    with sb.get_queue_sender("q") as sender:
        kept, cancelled = sender.schedule_messages(
            [ServiceBusMessage("a", message_id="s1"), ServiceBusMessage("b", message_id="s2")], at
        )
        sender.cancel_scheduled_messages(cancelled)
    emu.advance(dt.timedelta(minutes=11))
    found = emu.journey("q", message_id="s1").events
    assert [(e["event"], e["sequence_number"]) for e in found] == [("scheduled", kept), ("enqueued", 3)]
    assert abs((found[1]["time"] - at).total_seconds()) < 0.01  # at its scheduled time, not the advance's end
    assert found[1]["description"] == f"scheduled as {kept}"
    assert events(emu, "q", "s2") == [("scheduled", "q"), ("cancelled", "q")]


def test_a_topic_message_is_enqueued_in_each_subscription(emu: Emulator, sb: ServiceBusClient) -> None:
    with sb.get_topic_sender("t") as sender:
        sender.send_messages(ServiceBusMessage("x", message_id="t1"))
    found = emu.journey("t/Subscriptions/all", message_id="t1").events
    assert [(e["event"], e["entity"], e["came_from"]) for e in found] == [
        ("accepted", "t", None),
        ("enqueued", "t/Subscriptions/all", "t"),
    ]


def test_a_duplicate_is_dropped(emu: Emulator, sb: ServiceBusClient) -> None:
    with sb.get_queue_sender("dedup") as sender:
        sender.send_messages(ServiceBusMessage("x", message_id="d1"))
        sender.send_messages(ServiceBusMessage("x", message_id="d1"))
    assert events(emu, "dedup", "d1") == [("accepted", "dedup"), ("duplicate_dropped", "dedup")]


def test_receive_and_delete_defer_and_receive_deferred(emu: Emulator, sb: ServiceBusClient) -> None:
    with sb.get_queue_sender("q") as sender:
        sender.send_messages([ServiceBusMessage("a", message_id="r1"), ServiceBusMessage("b", message_id="r2")])
    with sb.get_queue_receiver("q", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
        (first,) = r.receive_messages(max_message_count=1, max_wait_time=WAIT)
    with sb.get_queue_receiver("q") as r:
        (second,) = r.receive_messages(max_message_count=1, max_wait_time=WAIT)
        r.defer_message(second)
        (again,) = r.receive_deferred_messages([second.sequence_number])
        r.renew_message_lock(again)
        r.complete_message(again)
    assert first.message_id == "r1"
    assert [(e["event"], e["delivery_count"]) for e in emu.journey("q", message_id="r1").events] == [
        ("accepted", None),
        ("received_and_deleted", 1),
    ]
    found = emu.journey("q", message_id="r2").events
    assert [(e["event"], e["delivery_count"]) for e in found] == [
        ("accepted", None),
        ("delivered", 1),
        ("deferred", 1),
        ("delivered", 1),  # deferring does not count a delivery
        ("lock_renewed", 1),
        ("completed", 1),
    ]
    assert found[3]["reason"] == "by its sequence number (deferred)"


def test_locks_lost_by_the_emulators_fault_switch(emu: Emulator, sb: ServiceBusClient) -> None:
    with sb.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage("a", message_id="l1"))
    with sb.get_queue_receiver("q") as r:
        (msg,) = r.receive_messages(max_message_count=1, max_wait_time=WAIT)
        assert emu.lose_locks("q") == 1
    found = emu.journey("q", message_id="l1").events
    shown = [(e["event"], e["delivery_count"]) for e in found]
    assert shown == [("accepted", None), ("delivered", 1), ("lock_lost", 1)]
    assert found[2]["lock_token"] == str(msg.lock_token) and found[2]["reason"] == "the entity's locks were lost"


def test_a_dead_letter_forwarded_arrives_at_its_target(emu: Emulator, sb: ServiceBusClient) -> None:
    with sb.get_queue_sender("dl-fwd") as sender:
        sender.send_messages(ServiceBusMessage("a", message_id="f1"))
    with sb.get_queue_receiver("dl-fwd") as r:
        (msg,) = r.receive_messages(max_message_count=1, max_wait_time=WAIT)
        r.abandon_message(msg)
    found = emu.journey("dl-fwd", message_id="f1").events
    assert [(e["event"], e["entity"], e["to"], e["came_from"]) for e in found] == [
        ("accepted", "dl-fwd", None, None),
        ("delivered", "dl-fwd", None, None),
        ("abandoned", "dl-fwd", None, None),
        ("dead_lettered", "dl-fwd", "dl-target", None),
        ("enqueued", "dl-target", None, "dl-fwd/$DeadLetterQueue"),
    ]
    assert found[3]["reason"] == "MaxDeliveryCountExceeded"


def test_a_purge_on_the_server_is_a_batch_delete(emu: Emulator, sb: ServiceBusClient) -> None:
    with sb.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage("a", message_id="p1"))
    core.purge("q", connection=emu.connection_string)
    assert events(emu, "q", "p1") == [("accepted", "q"), ("batch_deleted", "q")]


def test_an_events_detail_keywords_are_journey_event_fields_in_their_order() -> None:
    """The broker passes an event's detail by keyword (``EventDetail``) and the log keeps it in
    ``JourneyEvent``'s order: the two lists must stay one."""
    from sbnotebook.emulator.journey.log import DETAIL, JourneyEvent

    fields = list(JourneyEvent._fields)
    start = fields.index(DETAIL[0])
    assert tuple(fields[start : start + len(DETAIL)]) == DETAIL
