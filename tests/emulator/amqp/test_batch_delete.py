"""``com.microsoft:batch-delete-messages`` on the management link (what the .NET and JS SDKs'
``DeleteMessages``/``PurgeMessages`` send), through the real SDK, sync and async.

Service Bus: delete up to ``message-count`` (at most 4,000) of the oldest messages enqueued before
``enqueued-time-utc``; locked messages are not eligible; the reply carries ``message-count``, or
status 204 when nothing was deleted. The emulator also leaves deferred and scheduled messages (they
are not on the receive path); the kit removes those by sequence number."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.aio import ServiceBusClient as AsyncClient
from azure.servicebus.exceptions import ServiceBusError

from sbnotebook.core.entities import EntityPath
from sbnotebook.core.sdk.management import batch_delete, batch_delete_sync, management_handler
from sbnotebook.core.sdk.opening import close_now
from sbnotebook.emulator import Emulator
from tests.helpers import send


def _sequences(client: ServiceBusClient, queue: str, **kwargs: object) -> list[int]:
    with client.get_queue_receiver(queue, **kwargs) as r:  # type: ignore[arg-type]
        return [int(m.sequence_number or 0) for m in r.peek_messages(max_message_count=100, sequence_number=1)]


def test_deletes_the_oldest_available_and_skips_locked_deferred_scheduled(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    send(client, "q", *[f"m{i}" for i in range(10)])
    with client.get_queue_sender("q") as s:
        (scheduled,) = s.schedule_messages(ServiceBusMessage("later"), dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        got = r.receive_messages(max_message_count=3, max_wait_time=3)
        assert len(got) == 3
        r.defer_message(got[0])
        assert batch_delete_sync(r, 4) == 4  # the four oldest available: 4..7
        assert _sequences(client, "q") == [1, 2, 3, 8, 9, 10, scheduled]
        assert batch_delete_sync(r, 4000) == 3  # the rest of the receive path: 8, 9, 10
        assert batch_delete_sync(r, 10) == 0  # 204: nothing eligible
        # Locked messages were skipped and can still be settled with their locks.
        r.complete_message(got[1])
        r.complete_message(got[2])
    assert emulator.broker.counts("q") == {"active": 0, "deferred": 1, "scheduled": 1, "dead_letter": 0}


def test_message_count_is_checked(quick_client: ServiceBusClient) -> None:
    send(quick_client, "q", "a")
    with quick_client.get_queue_receiver("q") as r:
        for bad in (0, -1, 4001):
            with pytest.raises(ServiceBusError, match="out of range"):
                batch_delete_sync(r, bad)
        assert batch_delete_sync(r, 4000) == 1


def test_enqueued_time_cut_off(emulator: Emulator, client: ServiceBusClient) -> None:
    send(client, "q", "old-1", "old-2")
    time.sleep(0.05)
    cut = dt.datetime.now(dt.UTC)
    time.sleep(0.05)
    send(client, "q", "new-1")
    with client.get_queue_receiver("q") as r:
        assert batch_delete_sync(r, 100, before=cut) == 2
        assert batch_delete_sync(r, 100, before=cut) == 0
        assert [str(m) for m in r.peek_messages(max_message_count=10, sequence_number=1)] == ["new-1"]


def test_session_id_on_a_plain_queue_is_refused(quick_client: ServiceBusClient) -> None:
    with quick_client.get_queue_receiver("q") as r, pytest.raises(ServiceBusError, match="does not require sessions"):
        batch_delete_sync(r, 10, session_id="a")


async def test_async_dead_letter_queue(emulator: Emulator) -> None:
    async with AsyncClient.from_connection_string(emulator.connection_string, retry_total=0) as c:
        async with c.get_queue_sender("q") as s:
            await s.send_messages([ServiceBusMessage(f"d{i}") for i in range(5)])
        async with c.get_queue_receiver("q", max_wait_time=3) as r:
            for m in await r.receive_messages(max_message_count=5, max_wait_time=3):
                await r.dead_letter_message(m, reason="bad")
        async with c.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            assert await batch_delete(dlq, 3) == 3
            assert await batch_delete(dlq, 3) == 2
            assert await batch_delete(dlq, 3) == 0
    assert emulator.broker.counts("q") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}


async def test_async_sessions_named_and_unheld(emulator: Emulator) -> None:
    """With a session id: that session's messages. Without one (a management-only link, as a
    plain receiver cannot attach to a session-enabled queue): every session no receiver holds."""
    async with AsyncClient.from_connection_string(emulator.connection_string, retry_total=0) as c:
        async with c.get_queue_sender("sq60") as s:
            await s.send_messages([ServiceBusMessage(f"{sid}{i}", session_id=sid) for sid in "abc" for i in range(3)])
        async with c.get_queue_receiver("sq60", session_id="a") as held:
            assert await batch_delete(held, 10, session_id="a") == 3
            async with c.get_queue_receiver("sq60", session_id="b") as other:
                browser = management_handler(c, EntityPath.parse("sq60"))
                try:
                    assert await batch_delete(browser, 10) == 3  # c only: b is held
                    assert await batch_delete(browser, 10) == 0
                finally:
                    await close_now(browser)
                assert len(await other.peek_messages(max_message_count=10)) == 3
        async with c.get_queue_receiver("sq60", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=2) as left:
            assert left.session.session_id == "b"
    assert emulator.broker.counts("sq60")["active"] == 3


async def test_async_subscription_dead_letter_queue_through_a_management_handler(emulator: Emulator) -> None:
    async with AsyncClient.from_connection_string(emulator.connection_string, retry_total=0) as c:
        async with c.get_topic_sender("t") as s:
            await s.send_messages([ServiceBusMessage(f"t{i}") for i in range(4)])
        async with c.get_subscription_receiver("t", "all", max_wait_time=3) as r:
            for m in await r.receive_messages(max_message_count=4, max_wait_time=3):
                await r.dead_letter_message(m)
        browser = management_handler(c, EntityPath.parse("t/subscriptions/all/$deadletterqueue"))
        try:
            assert await batch_delete(browser, 4000) == 4
        finally:
            await close_now(browser)
    assert emulator.broker.counts("t/subscriptions/all")["dead_letter"] == 0


def test_survives_a_restart(tmp_path: object) -> None:
    with Emulator(None, data_dir=str(tmp_path)) as emu:
        with ServiceBusClient.from_connection_string(emu.connection_string) as c:
            send(c, "results", *[f"r{i}" for i in range(6)])
            with c.get_queue_receiver("results") as r:
                assert batch_delete_sync(r, 4) == 4
    with Emulator(None, data_dir=str(tmp_path)) as emu:
        assert emu.broker.counts("results")["active"] == 2
