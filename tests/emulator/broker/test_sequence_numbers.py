"""Sequence numbers: each queue and topic numbers its messages from 1, as Service Bus does."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook.emulator import Emulator
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import QuickCloseClient, send

pytestmark = pytest.mark.timeout(120)


def _peek_seqs(client: ServiceBusClient, queue: str) -> list[int]:
    with client.get_queue_receiver(queue) as r:
        return [m.sequence_number for m in r.peek_messages(max_message_count=50, sequence_number=1)]


def test_each_queue_numbers_from_one(client: ServiceBusClient) -> None:
    send(client, "q", "a", "b", "c")
    send(client, "fwd-dst", "x", "y")
    send(client, "q", "d")
    assert _peek_seqs(client, "q") == [1, 2, 3, 4]
    assert _peek_seqs(client, "fwd-dst") == [1, 2]


def test_topic_subscriptions_share_the_topics_numbers(client: ServiceBusClient) -> None:
    send(client, "q", "unrelated")
    with client.get_topic_sender("t") as s:
        s.send_messages([ServiceBusMessage("one"), ServiceBusMessage("two")])
    with client.get_subscription_receiver("t", "all") as r:
        assert [m.sequence_number for m in r.peek_messages(max_message_count=5, sequence_number=1)] == [1, 2]


def test_session_messages_use_their_entitys_numbers(client: ServiceBusClient) -> None:
    send(client, "q", "unrelated", "unrelated")
    with client.get_queue_sender("sq") as s:
        s.send_messages([ServiceBusMessage("a", session_id="s1"), ServiceBusMessage("b", session_id="s2")])
    with client.get_queue_receiver("sq", session_id="s2", max_wait_time=5) as r:
        (m,) = r.receive_messages(max_wait_time=5)
        assert m.sequence_number == 2
        r.complete_message(m)


def test_forwarded_messages_are_numbered_by_the_destination(client: ServiceBusClient) -> None:
    send(client, "fwd-dst", "direct")
    send(client, "fwd-src", "forwarded")
    assert _peek_seqs(client, "fwd-dst") == [1, 2]


def test_async_sequence_numbers(emulator: Emulator) -> None:
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    async def run() -> list[int]:
        async with AsyncClient.from_connection_string(emulator.connection_string) as c:
            async with c.get_queue_sender("q") as s:
                await s.send_messages(ServiceBusMessage("q1"))
            async with c.get_queue_sender("dedup") as s:
                await s.send_messages([ServiceBusMessage("d1"), ServiceBusMessage("d2")])
            async with c.get_queue_receiver("dedup") as r:
                return [m.sequence_number for m in await r.peek_messages(max_message_count=5, sequence_number=1)]

    assert asyncio.run(run()) == [1, 2]


def test_numbering_per_entity_survives_a_restart(tmp_path: Path) -> None:
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu:
        with QuickCloseClient.from_connection_string(emu.connection_string) as c:
            send(c, "q", "a", "b")
            send(c, "fwd-dst", "x")
            with c.get_queue_receiver("q", max_wait_time=5) as r:
                for m in r.receive_messages(max_message_count=2, max_wait_time=5):
                    r.complete_message(m)  # q is empty now; its numbering must still continue at 3
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu:
        with QuickCloseClient.from_connection_string(emu.connection_string) as c:
            send(c, "q", "c")
            send(c, "fwd-dst", "y")
            assert _peek_seqs(c, "q") == [3]
            assert _peek_seqs(c, "fwd-dst") == [1, 2]
