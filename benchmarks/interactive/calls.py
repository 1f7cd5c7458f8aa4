"""The calls interactive_latency.py times at each latency: the kit's on one live connection, the same
through the SDK kept open (the baseline), calls on receivers of their own, cold paths, and a scan."""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.core.sdk.admin import admin_client

QUEUE = "orders"
SCAN_QUEUE = "results"
SESSIONS = "sessions"


def ms(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    return statistics.median(ms(fn) for _ in range(repeat))


def receive_and_complete(conn: core.LiveConnection) -> None:
    with core.receive(QUEUE, max_messages=1, connection=conn) as batch:
        assert batch.complete().count("completed") == 1


def kit(cs: str, repeat: int) -> dict[str, float]:
    out: dict[str, float] = {}
    times = []
    for _ in range(3):  # a new live connection each time (median: the first also pays imports)
        t0 = time.perf_counter()
        core.connect(cs)
        times.append((time.perf_counter() - t0) * 1000)
        core.close_all()
    out["connect"] = statistics.median(times)
    conn = core.connect(cs)
    out["first peek 10 after connect"] = ms(lambda: core.peek(QUEUE, max_messages=10, connection=conn))
    out["peek 10"] = median_ms(lambda: core.peek(QUEUE, max_messages=10, connection=conn), repeat)
    core.send(QUEUE, ["warm"], connection=conn)  # opens the sender once
    out["send 1"] = median_ms(lambda: core.send(QUEUE, ["one"], connection=conn), repeat)
    core.counts(QUEUE, connection=conn)
    out["counts"] = median_ms(lambda: core.counts(QUEUE, connection=conn), repeat)
    receive_and_complete(conn)
    out["receive 1 + complete"] = median_ms(lambda: receive_and_complete(conn), repeat)
    out.update(own_receivers(conn, repeat))
    conn.close()
    return out


def own_receivers(conn: core.LiveConnection, repeat: int) -> dict[str, float]:
    """Calls on receivers of their own: receive-and-delete (a pool of its own: the link is kept
    only once drained) and a session (opened and closed every time: it holds its session)."""

    def delete_one() -> None:
        with core.receive(QUEUE, max_messages=1, mode="receive_and_delete", connection=conn) as batch:
            assert len(batch) == 1

    def session_one() -> float:
        core.send(SESSIONS, [{"body": "s", "session_id": "s1"}], connection=conn)  # not timed

        def receive() -> None:
            with core.receive(SESSIONS, max_messages=1, session_id="s1", connection=conn) as batch:
                assert batch.complete().count("completed") == 1

        return ms(receive)

    return {
        "receive-and-delete 1": median_ms(delete_one, repeat),
        "session receive 1 + complete": statistics.median(session_one() for _ in range(repeat)),
    }


def sdk_own_receivers(client: ServiceBusClient, repeat: int) -> dict[str, float]:
    """The same with the SDK: a ``with`` block per call (what a notebook cell does)."""
    from azure.servicebus import ServiceBusReceiveMode

    def delete_one() -> None:
        with client.get_queue_receiver(QUEUE, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            assert len(r.receive_messages(max_message_count=1, max_wait_time=5)) == 1

    def session_one() -> float:
        with client.get_queue_sender(SESSIONS) as s:  # not timed
            s.send_messages(ServiceBusMessage("s", session_id="s1"))

        def receive() -> None:
            with client.get_queue_receiver(SESSIONS, session_id="s1") as r:
                (m,) = r.receive_messages(max_message_count=1, max_wait_time=5)
                r.complete_message(m)

        return ms(receive)

    return {
        "receive-and-delete 1": median_ms(delete_one, repeat),
        "session receive 1 + complete": statistics.median(session_one() for _ in range(repeat)),
    }


def cold(cs: str, repeat: int) -> dict[str, float]:
    """First calls on an entity nothing has opened yet, on a live connection that has made one call
    on another entity (its spare AMQP connections are open: core/sdk/spares.py SpareConnections); and the
    same on a brand-new live connection (warm=False), which opens its own AMQP connection."""

    def first(call: Callable[[core.LiveConnection], Any], *, new_connection: bool = False) -> float:
        times = []
        for _ in range(repeat):
            conn = core.connect(cs, warm=False)
            if not new_connection:
                core.peek(SCAN_QUEUE, max_messages=1, connection=conn)  # the live connection in use
                conn.settle()
            times.append(ms(lambda: call(conn)))  # noqa: B023 (called at once)
            core.close_all()
        return statistics.median(times)

    return {
        "first peek on an entity": first(lambda c: core.peek(QUEUE, max_messages=1, connection=c)),
        "first send to an entity": first(lambda c: core.send(QUEUE, ["cold"], connection=c)),
        "first peek on a new live connection": first(
            lambda c: core.peek(QUEUE, max_messages=1, connection=c), new_connection=True
        ),
    }


def sdk(cs: str, repeat: int) -> dict[str, float]:
    out: dict[str, float] = {}
    settings = core.resolve(cs)
    with (
        ServiceBusClient.from_connection_string(cs) as client,
        client.get_queue_receiver(QUEUE) as receiver,
        client.get_queue_sender(QUEUE) as sender,
        admin_client(connection_string=cs, namespace=settings.fully_qualified_namespace, emulator=True) as admin,
    ):
        receiver.peek_messages(max_message_count=1)
        out["peek 10"] = median_ms(lambda: receiver.peek_messages(max_message_count=10), repeat)
        sender.send_messages(ServiceBusMessage("warm"))
        out["send 1"] = median_ms(lambda: sender.send_messages(ServiceBusMessage("one")), repeat)
        admin.get_queue_runtime_properties(QUEUE)
        out["counts"] = median_ms(lambda: admin.get_queue_runtime_properties(QUEUE), repeat)

        def one() -> None:
            (m,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            receiver.complete_message(m)

        one()
        out["receive 1 + complete"] = median_ms(one, repeat)
        out.update(sdk_own_receivers(client, repeat))
    return out


def scan(cs: str, n: int) -> tuple[float, int, float]:
    """Seconds to peek n messages through core.scan, how many, and the peak MiB allocated."""
    conn = core.connect(cs, warm=False)
    core.send(SCAN_QUEUE, ({"i": i, "pad": "x" * 200} for i in range(n)), connection=conn)
    # Once through first: the links a scan peeks its windows on stay open, as in a session (the
    # first scan of an entity also opens them, about 0.5 s each, concurrently).
    sum(len(page) for page in core.scan(SCAN_QUEUE, connection=conn))
    t0 = time.perf_counter()
    seen = sum(len(page) for page in core.scan(SCAN_QUEUE, connection=conn))
    elapsed = time.perf_counter() - t0
    tracemalloc.start()  # a second pass for memory: tracing slows Python too much to time it
    sum(len(page) for page in core.scan(SCAN_QUEUE, connection=conn))
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    conn.close()
    return elapsed, seen, peak
