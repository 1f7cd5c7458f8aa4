"""A receiver kept open must not grow with every message it has seen.

pyamqp's receiver link keeps each delivery tag until the link sends a disposition for it. The kit
settles many locks in one management request and receives pre-settled in receive-and-delete, so
neither ever sends one: before ``sdk/receiver.forget_deliveries`` a pooled or long-running receiver held one
tag per message (a 10^5 resubmit grew the kernel by 20-40 MiB, a 10^6 purge by about 50 MiB)."""

from __future__ import annotations

import asyncio

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.aio import ServiceBusClient as AsyncClient

from sbnotebook.core.operations.receive import fetch_batch
from sbnotebook.core.sdk.receiver import delivery_tags_held, settle_by_tokens
from sbnotebook.emulator import Emulator

N = 300


def fill(client: ServiceBusClient, n: int = N) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages([ServiceBusMessage(f"m{i}") for i in range(n)])


def test_settling_over_the_management_link_forgets_the_delivery_tags(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    fill(client)

    async def run() -> tuple[int, int]:
        async with AsyncClient.from_connection_string(emulator.connection_string) as c:
            async with c.get_queue_receiver("q", prefetch_count=0) as rcv:
                got = await fetch_batch(rcv, N, 10)
                before = delivery_tags_held(rcv)
                await settle_by_tokens(rcv, "complete", got)
                return before, delivery_tags_held(rcv)

    before, after = asyncio.run(asyncio.wait_for(run(), 60))
    assert before == N  # the SDK keeps them: what this guards against
    assert after == 0


def test_a_receive_and_delete_receiver_keeps_no_delivery_tags(emulator: Emulator, client: ServiceBusClient) -> None:
    fill(client)

    async def run() -> tuple[int, int]:
        async with AsyncClient.from_connection_string(emulator.connection_string) as c:
            mode = ServiceBusReceiveMode.RECEIVE_AND_DELETE
            async with c.get_queue_receiver("q", prefetch_count=0, receive_mode=mode) as rcv:
                got = await fetch_batch(rcv, N, 10, deletes=True)
                return len(got), delivery_tags_held(rcv)

    received, held = asyncio.run(asyncio.wait_for(run(), 60))
    assert received == N and held == 0
