"""A closed receiver's peek locks live on until they expire or are settled by lock token."""

from __future__ import annotations

import asyncio

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook.emulator import Emulator
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import QuickCloseClient, drain
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


def test_closing_a_receiver_keeps_its_locks_for_settlement_elsewhere(
    client: ServiceBusClient, emulator: Emulator
) -> None:
    with client.get_queue_sender("q") as s:  # 30 s locks
        s.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    with client.get_queue_receiver("q", max_wait_time=5) as first:
        got = first.receive_messages(max_message_count=2, max_wait_time=5)
        assert len(got) == 2
    with client.get_queue_receiver("q", max_wait_time=1) as second:
        assert second.receive_messages(max_wait_time=1) == []  # still locked
        second.complete_message(got[0])  # by lock token, through the management link
        second.abandon_message(got[1])
        (again,) = second.receive_messages(max_wait_time=5)
        assert (str(again), again.delivery_count) == ("b", 1)
        second.complete_message(again)
    assert emulator.broker.counts("q")["active"] == 0


def test_locks_of_a_closed_receiver_expire_with_a_delivery_attempt() -> None:
    with (
        Emulator(TEST_TOPOLOGY, clock="manual") as emu,
        QuickCloseClient.from_connection_string(emu.connection_string) as c,
    ):
        with c.get_queue_sender("q") as s:  # 30 s locks
            s.send_messages(ServiceBusMessage("x"))
        with c.get_queue_receiver("q", max_wait_time=5) as r:
            (m,) = r.receive_messages(max_wait_time=5)
        assert drain(c, "q", wait=0.5) == []  # still locked after its receiver closed
        # The drain's link had credit in receive-and-delete: had the broker not yet read its close when
        # the lock expired, the message would have gone to it and been deleted (seen under load, nox).
        wait_until(lambda: emu.connections == 0)
        emu.advance(31)  # fires the expiry before it returns
        assert emu.broker.peek(emu.broker.resolve_source("q"), 1, 1)[0].lock_token is None
        (back,) = drain(c, "q", wait=3, count=1)
        assert (back.sequence_number, back.delivery_count) == (m.sequence_number, 1)


def test_async_closed_receiver_keeps_locks(emulator: Emulator) -> None:
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    async def run() -> int:
        async with AsyncClient.from_connection_string(emulator.connection_string) as c:
            async with c.get_queue_sender("q") as s:
                await s.send_messages(ServiceBusMessage("a"))
            async with c.get_queue_receiver("q", max_wait_time=5) as first:
                (m,) = await first.receive_messages(max_wait_time=5)
            async with c.get_queue_receiver("q", max_wait_time=1) as second:
                assert await second.receive_messages(max_wait_time=1) == []
                await second.complete_message(m)
        return emulator.broker.counts("q")["active"]

    assert asyncio.run(run()) == 0
