"""Settlement through the real SDK: complete, abandon, defer, dead-letter, locks."""

from __future__ import annotations

import datetime as dt

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import MessageLockLostError, MessageNotFoundError

from sbnotebook.emulator import Emulator
from tests.helpers import drain, send


def test_complete_removes_the_message(client: ServiceBusClient) -> None:
    """Rule: complete (AMQP accepted) deletes the message."""
    send(client, "q", "done")
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        (m,) = r.receive_messages(max_wait_time=3)
        r.complete_message(m)
        assert r.peek_messages(max_message_count=10, sequence_number=1) == []


def test_abandon_raises_delivery_count_and_merges_properties(client: ServiceBusClient) -> None:
    """Rule: abandon (modified, delivery-failed) unlocks, counts a delivery, applies properties to modify."""
    send(client, "q", "retry-me", application_properties={"keep": "yes"})
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        (m,) = r.receive_messages(max_wait_time=3)
        assert m.delivery_count == 0
        r.abandon_message(m)  # plain abandon
        (m,) = r.receive_messages(max_wait_time=3)
        assert m.delivery_count == 1
        # Python's SDK has no public properties_to_modify; send the wire form .NET uses (modified + annotations).
        r._handler.settle_messages(
            m._delivery_id,
            m._delivery_tag,
            "modified",
            delivery_failed=True,
            undeliverable_here=False,
            message_annotations={"attempt": 2},
            await_outcome=True,
        )
        (m,) = r.receive_messages(max_wait_time=3)
        assert m.delivery_count == 2
        assert m.application_properties[b"attempt"] == 2
        assert m.application_properties[b"keep"] == b"yes"
        r.complete_message(m)


def test_max_delivery_count_moves_message_to_dead_letter_queue(client: ServiceBusClient) -> None:
    """Rule: once the delivery count reaches MaxDeliveryCount the message is dead-lettered
    with reason MaxDeliveryCountExceeded."""
    send(client, "short", "poison")  # MaxDeliveryCount 3
    with client.get_queue_receiver("short", max_wait_time=2) as r:
        for expected in range(3):
            (m,) = r.receive_messages(max_wait_time=30)
            assert m.delivery_count == expected
            r.abandon_message(m)
        assert r.receive_messages(max_wait_time=1) == []
    (dead,) = drain(client, "short", sub_queue=ServiceBusSubQueue.DEAD_LETTER, count=1)
    assert str(dead) == "poison"
    assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert dead.delivery_count == 3


def test_dead_letter_with_reason_and_description(client: ServiceBusClient) -> None:
    """Rule: dead-letter (rejected, com.microsoft:dead-letter) moves to the DLQ with both properties."""
    send(client, "q", "bad")
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        (m,) = r.receive_messages(max_wait_time=3)
        r.dead_letter_message(m, reason="ValidationFailed", error_description="field x missing")
        assert r.peek_messages(max_message_count=5, sequence_number=1) == []
    with client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=3) as dlq:
        (peeked,) = dlq.peek_messages(max_message_count=5, sequence_number=1)
        assert peeked.dead_letter_reason == "ValidationFailed"
        (d,) = dlq.receive_messages(max_wait_time=3)
        assert d.dead_letter_reason == "ValidationFailed"
        assert d.dead_letter_error_description == "field x missing"
        assert d.sequence_number == peeked.sequence_number
        dlq.complete_message(d)
        assert dlq.peek_messages(max_message_count=5, sequence_number=1) == []


def test_defer_then_fetch_by_sequence_number_and_complete(quick_client: ServiceBusClient) -> None:
    """Rule: a deferred message leaves the receive path; only receive-by-sequence-number returns it,
    and it is settled through the management link."""
    send(quick_client, "q", "later", "now")
    with quick_client.get_queue_receiver("q", max_wait_time=2) as r:
        first, second = r.receive_messages(max_message_count=2, max_wait_time=3)
        seq = first.sequence_number
        r.defer_message(first)
        r.complete_message(second)
        assert r.receive_messages(max_wait_time=1) == []
        (peeked,) = r.peek_messages(max_message_count=5, sequence_number=1)
        assert peeked.sequence_number == seq
        assert peeked.state.name == "DEFERRED"
        (again,) = r.receive_deferred_messages([seq])
        assert str(again) == "later"
        assert again.lock_token is not None
        r.complete_message(again)
        assert r.peek_messages(max_message_count=5, sequence_number=1) == []
        with pytest.raises(MessageNotFoundError):
            r.receive_deferred_messages([seq])


def test_deferred_message_can_be_dead_lettered_through_management(client: ServiceBusClient) -> None:
    """Rule: update-disposition 'suspended' dead-letters a deferred message."""
    send(client, "q", "deferred-bad")
    with client.get_queue_receiver("q", max_wait_time=2) as r:
        (m,) = r.receive_messages(max_wait_time=3)
        r.defer_message(m)
        (d,) = r.receive_deferred_messages([m.sequence_number])
        r.dead_letter_message(d, reason="GaveUp", error_description="after deferral")
    (dead,) = drain(client, "q", sub_queue=ServiceBusSubQueue.DEAD_LETTER, count=1)
    assert dead.dead_letter_reason == "GaveUp"


@pytest.mark.servicebus_clock("manual")  # the broker's time moves only with advance(): no race with a loaded machine
@pytest.mark.manual_clock_ahead  # settles on a short lock after advance(): tests/conftest.py
def test_lock_expiry_redelivers_with_higher_count_and_old_lock_is_lost(
    quick_client: ServiceBusClient, emulator: Emulator
) -> None:
    """Rule: when a lock expires the message becomes available again with its delivery count raised;
    settling with the expired lock fails with MessageLockLostError."""
    send(quick_client, "short", "slow")  # LockDuration PT1S
    with quick_client.get_queue_receiver("short", max_wait_time=3) as r:
        (m,) = r.receive_messages(max_wait_time=3)
        emulator.advance(1.5)  # past the lock: it expires, the message is back
        (again,) = r.receive_messages(max_wait_time=30)
        assert again.delivery_count == 1
        assert again.lock_token != m.lock_token
        with pytest.raises(MessageLockLostError):
            r.complete_message(m)
        r.complete_message(again)


def test_settling_an_unknown_lock_is_lock_lost(quick_client: ServiceBusClient) -> None:
    """Rule: a lock the broker does not hold (here: already completed twice) is lost."""
    send(quick_client, "q", "twice")
    with quick_client.get_queue_receiver("q", max_wait_time=3) as r:
        (m,) = r.receive_messages(max_wait_time=3)
        r.complete_message(m)
        m._settled = False  # force the SDK to send a second disposition for the same lock
        with pytest.raises(MessageLockLostError):
            r.complete_message(m)


@pytest.mark.servicebus_clock("manual")  # the broker's time moves only with advance(): no race with a loaded machine
@pytest.mark.manual_clock_ahead  # settles on a short lock after advance(): tests/conftest.py
def test_renew_lock_extends_locked_until(client: ServiceBusClient, emulator: Emulator) -> None:
    """Rule: renew-lock returns a new expiry one LockDuration from now, and the message stays locked."""
    send(client, "short", "renew-me")
    with client.get_queue_receiver("short", max_wait_time=3) as r:
        (m,) = r.receive_messages(max_wait_time=3)
        first = m.locked_until_utc
        for _ in range(3):
            emulator.advance(0.6)  # never past the lock between two renewals, however slow the machine
            new = r.renew_message_lock(m)
            assert new > first
        # 1.8 s after receipt with a 1 s lock: still ours because we renewed.
        r.complete_message(m)
        assert r.peek_messages(max_message_count=5, sequence_number=1) == []


def test_peek_does_not_lock_or_count(client: ServiceBusClient) -> None:
    """Rule: peek is non-destructive: no lock, no delivery count change."""
    send(client, "q", "a", "b", "c")
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        first = r.peek_messages(max_message_count=10, sequence_number=1)
        assert [str(m) for m in first] == ["a", "b", "c"]
        again = r.peek_messages(max_message_count=2, sequence_number=first[1].sequence_number)
        assert [str(m) for m in again] == ["b", "c"]
        got = r.receive_messages(max_message_count=3, max_wait_time=3)
        assert [m.delivery_count for m in got] == [0, 0, 0]
        for m in got:
            r.complete_message(m)


@pytest.mark.servicebus_clock("manual")  # the broker's time moves only with advance(): no race with a loaded machine
def test_scheduled_message_is_peekable_then_delivered_on_time(
    client: ServiceBusClient, quick_client: ServiceBusClient, emulator: Emulator
) -> None:
    """Rule: a scheduled message has state 'scheduled' until its time, then is enqueued as if sent
    then, under a new sequence number (Azure's message-sequencing page: the number it was scheduled
    under is only valid while it is scheduled); that old number no longer cancels anything."""
    when = emulator.now() + dt.timedelta(seconds=3)
    with client.get_queue_sender("q") as s:
        (seq,) = s.schedule_messages(ServiceBusMessage("future"), when)
        s.send_messages(ServiceBusMessage("now"))
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        peeked = r.peek_messages(max_message_count=5, sequence_number=1)
        assert [(x.sequence_number, str(x), x.state.name) for x in peeked] == [
            (seq, "future", "SCHEDULED"),
            (seq + 1, "now", "ACTIVE"),
        ]
        (first,) = r.receive_messages(max_wait_time=30)
        assert str(first) == "now"
        r.complete_message(first)
        emulator.advance(3)  # its time: enqueued before advance() returns
        (m,) = r.receive_messages(max_wait_time=30)
        assert str(m) == "future"
        assert m.sequence_number == seq + 2  # numbered after "now": appended when it fell due
        assert m.enqueued_time_utc is not None and m.enqueued_time_utc >= when - dt.timedelta(milliseconds=5)
        assert abs((m.scheduled_enqueue_time_utc - when).total_seconds()) < 0.01
        r.complete_message(m)
    # Without retries: the SDK retries a not-found (10 s of backoff) before it raises.
    with quick_client.get_queue_sender("q") as s, pytest.raises(MessageNotFoundError):
        s.cancel_scheduled_messages(seq)


@pytest.mark.servicebus_clock("manual")  # the broker's time moves only with advance(): no race with a loaded machine
def test_cancel_scheduled_message(quick_client: ServiceBusClient, emulator: Emulator) -> None:
    """Rule: cancel-scheduled-message removes a scheduled message; unknown numbers are not found."""
    when = emulator.now() + dt.timedelta(seconds=1)
    with quick_client.get_queue_sender("q") as s:
        seqs = s.schedule_messages([ServiceBusMessage("x"), ServiceBusMessage("y")], when)
        s.cancel_scheduled_messages(seqs)
        with pytest.raises(MessageNotFoundError):
            s.cancel_scheduled_messages(seqs[0])
    emulator.advance(1.5)  # past the time they were scheduled for
    assert drain(quick_client, "q", wait=0.5) == []


@pytest.mark.servicebus_clock("manual")  # the broker's time moves only with advance(): no race with a loaded machine
def test_scheduled_via_message_property_on_plain_send(client: ServiceBusClient, emulator: Emulator) -> None:
    """Rule: a message sent with a scheduled enqueue time waits for it."""
    when = emulator.now() + dt.timedelta(seconds=3)
    send(client, "q", "prop-scheduled", scheduled_enqueue_time_utc=when)
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        (p,) = r.peek_messages(max_message_count=5, sequence_number=1)
        assert p.state.name == "SCHEDULED"
        emulator.advance(3)
        (m,) = r.receive_messages(max_wait_time=30)
        assert m.enqueued_time_utc >= when - dt.timedelta(milliseconds=5)
        r.complete_message(m)
