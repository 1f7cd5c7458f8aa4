"""The same rules through the async SDK client (azure.servicebus.aio)."""

from __future__ import annotations

import datetime as dt

import pytest
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.aio import ServiceBusClient
from azure.servicebus.exceptions import (
    MessageLockLostError,
    MessageNotFoundError,
    MessageSizeExceededError,
    MessagingEntityNotFoundError,
    ServiceBusAuthenticationError,
    SessionCannotBeLockedError,
)

from sbnotebook.emulator import Emulator
from tests.conftest import TEST_TOPOLOGY

# These tests run on the kit's own pytest plugin (docs/testing.md): the suite's topology, a fresh
# namespace per test; the marker makes conftest's emulator (and so its clients) the plugin's.
pytestmark = pytest.mark.servicebus_topology(config=TEST_TOPOLOGY)


async def test_batch_send_peek_lock_and_every_settlement(emulator: Emulator) -> None:
    """Rule: complete deletes, abandon counts a delivery, defer needs the sequence number,
    dead-letter moves to the DLQ with reason and description."""
    async with ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as c:
        async with c.get_queue_sender("q") as s:
            batch = await s.create_message_batch()
            for name in ("complete", "abandon", "defer", "dead"):
                batch.add_message(ServiceBusMessage(name, application_properties={"k": name}))
            await s.send_messages(batch)
        async with c.get_queue_receiver("q", max_wait_time=3) as r:
            got = {str(m): m for m in await r.receive_messages(max_message_count=4, max_wait_time=3)}
            assert set(got) == {"complete", "abandon", "defer", "dead"}
            assert all(m.delivery_count == 0 for m in got.values())
            await r.complete_message(got["complete"])
            await r.abandon_message(got["abandon"])
            await r.defer_message(got["defer"])
            await r.dead_letter_message(got["dead"], reason="R", error_description="D")
            (again,) = await r.receive_messages(max_message_count=5, max_wait_time=30)
            assert str(again) == "abandon" and again.delivery_count == 1
            await r.complete_message(again)
            (deferred,) = await r.receive_deferred_messages([got["defer"].sequence_number])
            await r.complete_message(deferred)
            with pytest.raises(MessageNotFoundError):
                await r.receive_deferred_messages([got["defer"].sequence_number])
            assert await r.peek_messages(max_message_count=10, sequence_number=1) == []
        async with c.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=3) as d:
            (dead,) = await d.receive_messages(max_wait_time=3)
            assert (dead.dead_letter_reason, dead.dead_letter_error_description) == ("R", "D")
            await d.complete_message(dead)


@pytest.mark.servicebus_clock("manual")  # the broker's time moves only with advance(): no race with a loaded machine
@pytest.mark.manual_clock_ahead  # settles on a short lock after advance(): tests/conftest.py
async def test_lock_expiry_renewal_and_lock_lost(emulator: Emulator) -> None:
    """Rule: renewal keeps a lock; an expired lock cannot settle (MessageLockLostError)."""
    async with ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as c:
        async with c.get_queue_sender("short") as s:
            await s.send_messages([ServiceBusMessage("kept"), ServiceBusMessage("lapsed")])
        async with c.get_queue_receiver("short", max_wait_time=3) as r:
            kept, lapsed = await r.receive_messages(max_message_count=2, max_wait_time=3)
            for _ in range(3):
                emulator.advance(0.5)  # never past the 1 s lock between two renewals
                await r.renew_message_lock(kept)
            await r.complete_message(kept)
            with pytest.raises(MessageLockLostError):
                await r.complete_message(lapsed)
            (back,) = await r.receive_messages(max_wait_time=3)
            assert str(back) == "lapsed" and back.delivery_count == 1
            await r.complete_message(back)


async def test_schedule_cancel_and_peek_states(emulator: Emulator) -> None:
    """Rule: scheduled messages are peekable with state 'scheduled' and can be cancelled."""
    async with ServiceBusClient.from_connection_string(emulator.connection_string) as c:
        async with c.get_queue_sender("q") as s:
            when = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
            keep, drop = await s.schedule_messages([ServiceBusMessage("keep"), ServiceBusMessage("drop")], when)
            await s.cancel_scheduled_messages(drop)
        async with c.get_queue_receiver("q") as r:
            (p,) = await r.peek_messages(max_message_count=10, sequence_number=1)
            assert p.sequence_number == keep and p.state.name == "SCHEDULED"


async def test_sessions_async(emulator: Emulator) -> None:
    """Rule: one holder per session; next-available picks a session with messages."""
    async with ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as c:
        async with c.get_queue_sender("sq60") as s:
            await s.send_messages([ServiceBusMessage(f"m{i}", session_id="z") for i in range(3)])
        async with c.get_queue_receiver("sq60", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=2) as r:
            assert r.session.session_id == "z"
            with pytest.raises(SessionCannotBeLockedError):
                async with c.get_queue_receiver("sq60", session_id="z", max_wait_time=1) as other:
                    await other.receive_messages(max_wait_time=1)
            got = await r.receive_messages(max_message_count=5, max_wait_time=30)
            assert [str(m) for m in got] == ["m0", "m1", "m2"]
            for m in got:
                await r.complete_message(m)


async def test_errors_async(emulator: Emulator) -> None:
    """Rule: not-found, size and authentication errors map to the same SDK exceptions."""
    async with ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as c:
        with pytest.raises(MessagingEntityNotFoundError):
            async with c.get_queue_sender("missing") as s:
                await s.send_messages(ServiceBusMessage("x"))
        async with c.get_queue_sender("tiny") as s:
            with pytest.raises(MessageSizeExceededError):
                await s.send_messages(ServiceBusMessage(b"x" * 8000))
    bad = emulator.connection_string.replace("SAS_KEY_VALUE", "nope")
    async with ServiceBusClient.from_connection_string(bad, retry_total=0) as c:
        with pytest.raises(ServiceBusAuthenticationError):
            async with c.get_queue_sender("q") as s:
                await s.send_messages(ServiceBusMessage("x"))


async def test_a_drain_uses_up_the_credit_and_is_answered(emulator: Emulator) -> None:
    """Rule (AMQP drain, Azure/azure-amqp AmqpLink.ProcessFlow): on a flow with drain set, the
    broker advances its delivery count over the credit it has not used and answers with a flow;
    what it sent before that answer has arrived. The kit's receive-and-delete waits for that
    answer (core/sdk/receiver.py drain_credit)."""
    from sbnotebook.core.sdk.receiver import drain_credit

    async with ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as c:
        # Receive-and-delete: the SDK buffers what arrives between receive calls (in peek-lock it
        # gives such messages back at once, released).
        async with c.get_queue_receiver(
            "q", prefetch_count=0, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
        ) as r:
            assert await r.receive_messages(max_message_count=5, max_wait_time=0.3) == []  # leaves credit 5
            async with c.get_queue_sender("q") as s:
                await s.send_messages(ServiceBusMessage("sent to the idle credit"))
            late: list[ServiceBusReceivedMessage] = []
            answered = await drain_credit(r, late, timeout=5)
            assert answered  # the broker's answer: 4 units of credit left unused
            assert [str(m) for m in late] == ["sent to the idle credit"]
            assert r._handler._link.current_link_credit == 0
