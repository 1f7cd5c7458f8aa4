"""Several management requests in flight on one receiver (threads, asyncio.gather, AutoLockRenewer)."""

from __future__ import annotations

import asyncio
import datetime as dt
from concurrent.futures import ThreadPoolExecutor

import pytest
from azure.servicebus import AutoLockRenewer, ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage

from sbnotebook.emulator import Emulator
from tests.helpers import QuickCloseClient
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)
ROUNDS = 60


def _fill(client: ServiceBusClient, n: int = 20) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages([ServiceBusMessage(f"m{i}") for i in range(n)])


def test_concurrent_peeks_and_renewals_from_threads(emulator: Emulator) -> None:
    """Rule: Service Bus answers every request even when the SDK's threads race on delivery ids;
    the connection (and every lock on it) survives.

    The sync SDK registers a management request as pending only after sending it (its
    management_link.execute_operation): when another thread reads the reply in between, the reply
    is dropped and, with no bound, that call waits forever (seen once in a contended suite run). So
    this client bounds each attempt (``try_timeout``) and the SDK's retry asks again: an emulator
    that did not answer would still fail the test, after the retries."""
    with QuickCloseClient.from_connection_string(emulator.connection_string, try_timeout=5) as client:
        _fill(client)
        with client.get_queue_receiver("q", max_wait_time=5) as r:
            got = r.receive_messages(max_message_count=10, max_wait_time=5)
            assert len(got) == 10
            with ThreadPoolExecutor(8) as pool:
                sizes = list(
                    pool.map(lambda _: len(r.peek_messages(max_message_count=5, sequence_number=1)), range(ROUNDS))
                )
                renewed = list(pool.map(r.renew_message_lock, got * 3))
            assert sizes == [5] * ROUNDS
            assert len(renewed) == 30
            for m in got:
                r.complete_message(m)  # the locks survived: no MessageLockLostError
    assert emulator.broker.counts("q")["active"] == 10


def test_concurrent_peeks_with_asyncio_gather(emulator: Emulator) -> None:
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    async def run() -> list[int]:
        async with AsyncClient.from_connection_string(emulator.connection_string) as c:
            async with c.get_queue_sender("q") as s:
                await s.send_messages([ServiceBusMessage(f"m{i}") for i in range(20)])
            async with c.get_queue_receiver("q", max_wait_time=5) as r:
                got = await r.receive_messages(max_message_count=10, max_wait_time=5)
                sizes = await asyncio.gather(
                    *(r.peek_messages(max_message_count=5, sequence_number=1) for _ in range(ROUNDS))
                )
                await asyncio.gather(*(r.renew_message_lock(m) for m in got))
                for m in got:
                    await r.complete_message(m)
                return [len(x) for x in sizes]

    assert asyncio.run(run()) == [5] * ROUNDS
    assert emulator.broker.counts("q")["active"] == 10


def test_auto_lock_renewer_with_eight_workers() -> None:
    """AutoLockRenewer(max_workers=8) renews many locks at once on one connection.

    A 20 s lock: the SDK renews a lock this short once 75% of it is left (15 s), so a renewal that
    waits seconds for its turn on a busy host still lands. With a 4 s lock (3 s of margin), then a
    10 s one (7.5 s), the renewer's threads were late under CPU contention (ci-loaded, nox -s dbr15
    beside two CPU-bound processes: a real lock loss, not an emulator fault). The test waits until
    every lock has been renewed and the first locks' time has run out, not a fixed time.
    """
    queue = {"Name": "r", "Properties": {"LockDuration": "PT20S"}}
    topology = {"UserConfig": {"Namespaces": [{"Name": "n", "Queues": [queue]}]}}
    failures: list[Exception] = []
    # try_timeout: a renewal whose reply the SDK dropped (see the test above) is asked again in time.
    with (
        Emulator(topology) as emu,
        QuickCloseClient.from_connection_string(emu.connection_string, try_timeout=4) as client,
    ):
        with client.get_queue_sender("r") as s:
            s.send_messages([ServiceBusMessage(f"r{i}") for i in range(16)])
        renewer = AutoLockRenewer(max_lock_renewal_duration=60, max_workers=8)
        with client.get_queue_receiver("r", max_wait_time=5) as r:
            got: list[ServiceBusReceivedMessage] = []
            try:
                while len(got) < 16:
                    batch = r.receive_messages(max_message_count=16, max_wait_time=5)
                    assert batch
                    got += batch
                    for m in batch:  # registered as received, before the next receive
                        renewer.register(r, m, on_lock_renew_failure=lambda _m, e: failures.append(e))  # type: ignore[arg-type,misc]
                first = {id(m): m.locked_until_utc for m in got}
                # Every lock renewed, then past the first locks' end: only renewals keep them now.
                wait_until(lambda: all(m.locked_until_utc > first[id(m)] for m in got), timeout=60)
                wait_until(lambda: dt.datetime.now(dt.UTC) > max(first.values()), timeout=60, interval=0.2)
            finally:
                # The renewer stops (and waits for renewals in flight) before the messages are
                # settled and the receiver closes: a renewal racing the receiver's close fails
                # with the SDK's "Management Operation error" (its $management link detached).
                renewer.close()
            for m in got:
                r.complete_message(m)
        assert not failures
        assert emu.broker.counts("r") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}
