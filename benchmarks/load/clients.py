"""The SDK's side of the load benchmark: one client's round trip (served while the port holds idle
or stalled peers), SDK connections opened one after another, a connection refused over the cap,
and many concurrent clients sending and receiving against one client doing the same work."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient as AsyncClient

QUEUE = "orders"  # round trips and refusals
BUSY_QUEUE = "results"  # the throughput runs
WAIT = 5.0  # seconds a receive waits for its first message
EMPTY = 2.0  # seconds without a message after which a throughput receiver takes the queue as empty


def round_trip(conn: str, options: dict[str, Any], body: str = "ping") -> float:
    """Seconds for a new client to open, send one message, receive and complete it."""
    started = time.perf_counter()
    with ServiceBusClient.from_connection_string(conn, retry_total=0, **options) as client:
        with client.get_queue_sender(QUEUE, keep_alive=0) as sender:
            sender.send_messages(ServiceBusMessage(body))
        with client.get_queue_receiver(QUEUE, keep_alive=0, max_wait_time=WAIT) as receiver:
            got = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
            if [str(m) for m in got] != [body]:
                raise RuntimeError(f"the round trip got {[str(m) for m in got]}")
            receiver.complete_message(got[0])
    return time.perf_counter() - started


def sdk_opens_per_second(conn: str, count: int) -> float:
    """SDK senders opened (connection, SASL, $cbs token, link) and closed one after another."""
    started = time.perf_counter()
    with ServiceBusClient.from_connection_string(conn) as client:
        for _ in range(count):
            with client.get_queue_sender(QUEUE, keep_alive=0):
                pass  # entering opens it
    return count / (time.perf_counter() - started)


def refused(conn: str) -> tuple[float, str]:
    """Seconds until a new client's send fails, and the error's type and first words ("" if it succeeded)."""
    started = time.perf_counter()
    try:
        with ServiceBusClient.from_connection_string(conn) as client, client.get_queue_sender(QUEUE) as sender:
            sender.send_messages(ServiceBusMessage("over the cap"))
    except Exception as exc:  # what the SDK raises is the figure
        return time.perf_counter() - started, f"{type(exc).__name__}: {str(exc)[:90]}"
    return time.perf_counter() - started, ""


@dataclass
class Throughput:
    clients: int
    processes: int
    messages: int
    seconds: float  # from the first send to the last completion, clients open
    sending: float  # of which sending
    received: Counter[str]

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    @property
    def exactly_once(self) -> bool:
        return len(self.received) == self.messages and set(self.received.values()) == {1}


def throughput(conn: str, clients: int, messages: int, processes: int = 1) -> Throughput:
    """``clients`` async SDK clients spread over ``processes`` processes (an application's instances:
    one Python process's clients share its one core), each a sender and a receiver: each sends its
    share one message a call, then all receive and complete, one message a call, until the queue is
    empty. Every message must come back exactly once."""
    processes = max(1, min(processes, clients))
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes)
    shares = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
    firsts = [sum(shares[:i]) for i in range(processes)]
    results = context.Queue()
    workers = [
        context.Process(target=_work, args=(conn, firsts[i], shares[i], clients, messages, barrier, results))
        for i in range(processes)
    ]
    for worker in workers:
        worker.start()
    parts = [results.get(timeout=900) for _ in workers]
    for worker in workers:
        worker.join(30)
    received: Counter[str] = Counter()
    for _, _, _, bodies in parts:
        received.update(bodies)
    start = min(p[0] for p in parts)
    return Throughput(
        clients, processes, messages, max(p[2] for p in parts) - start, max(p[1] for p in parts) - start, received
    )


def _work(conn: str, first: int, count: int, clients: int, messages: int, barrier: Any, results: Any) -> None:
    """One process's clients; puts (send started, sends done, last completion, bodies received)."""
    results.put(asyncio.run(_clients(conn, range(first, first + count), clients, messages, barrier)))


async def _clients(
    conn: str, ids: range, clients: int, messages: int, barrier: Any
) -> tuple[float, float, float, list[str]]:
    opened = [AsyncClient.from_connection_string(conn) for _ in ids]
    senders = [c.get_queue_sender(BUSY_QUEUE) for c in opened]
    receivers = [c.get_queue_receiver(BUSY_QUEUE, max_wait_time=WAIT, prefetch_count=0) for c in opened]
    await asyncio.gather(*(s.__aenter__() for s in senders), *(r.__aenter__() for r in receivers))
    shares = {i: messages // clients + (1 if i < messages % clients else 0) for i in ids}
    bodies: list[str] = []
    last = [0.0]

    async def send(sender: Any, i: int) -> None:
        for j in range(shares[i]):
            await sender.send_messages(ServiceBusMessage(f"{i}-{j}"))

    async def receive(receiver: Any) -> None:
        while got := await receiver.receive_messages(max_message_count=1, max_wait_time=EMPTY):
            for m in got:
                await receiver.complete_message(m)
                bodies.append(str(m))
                last[0] = time.monotonic()

    await asyncio.to_thread(barrier.wait)  # every process's clients are open
    started = time.monotonic()
    await asyncio.gather(*(send(s, i) for s, i in zip(senders, ids, strict=True)))
    sent = time.monotonic()
    await asyncio.to_thread(barrier.wait)  # every message is in the queue
    await asyncio.gather(*(receive(r) for r in receivers))
    await asyncio.gather(*(s.close() for s in senders), *(r.close() for r in receivers))
    await asyncio.gather(*(c.close() for c in opened))
    return started, sent, last[0], bodies
