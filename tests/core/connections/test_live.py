"""The live connection: links kept open and reused, reconnect after a restart, concurrent callers."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook.core import trust
from sbnotebook.core.connections.live import LiveConnection
from sbnotebook.emulator import Emulator
from tests.conftest import TEST_TOPOLOGY
from tests.processes import free_port, server_sockets
from tests.waiting import HANG, settled, wait_until


def test_calls_reuse_the_same_connections(emulator: Emulator) -> None:
    assert emulator.port is not None
    with core.connect(emulator.connection_string) as conn:
        core.send("q", [f"m{i}" for i in range(20)], connection=conn)
        core.peek("q", max_messages=10, connection=conn)
        with core.receive("q", max_messages=2, connection=conn) as batch:
            batch.complete()
        conn.settle()  # the background warm-up and spare connections opened
        opened = conn.links_opened
        sockets = server_sockets(emulator.port)
        assert sockets, "the live connection keeps its connections open between calls"
        for _ in range(10):
            core.send("q", ["again"], connection=conn)
            assert len(core.peek("q", max_messages=10, connection=conn)) == 10
            with core.receive("q", max_messages=1, connection=conn) as batch:
                assert batch.complete().count("completed") == 1
        assert conn.links_opened == opened  # warm calls open nothing
        assert server_sockets(emulator.port) == sockets  # the very same TCP connections at the broker


def test_one_tls_context_serves_every_link(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK opens a TCP connection per link and, unless handed a context, builds a TLS context and
    # loads CA certificates for each (~65 ms of CPU per entity first touched, measured).
    import ssl

    loads: list[str] = []
    for name in ("load_default_certs", "load_verify_locations"):
        original = getattr(ssl.SSLContext, name)

        def counted(self: ssl.SSLContext, *args: object, _name: str = name, _f: Any = original, **kw: object) -> Any:
            loads.append(_name)
            return _f(self, *args, **kw)

        monkeypatch.setattr(ssl.SSLContext, name, counted)
    trust._context.cache_clear()
    try:
        with core.connect(emulator.connection_string, warm=False) as conn:
            core.send("q", ["one"], connection=conn)
            for entity in ("q", "short", "once"):
                core.peek(entity, connection=conn)
            assert conn.links_opened >= 4
        assert len(loads) <= 1, f"CA certificates loaded {len(loads)} times: {loads}"
    finally:
        trust._context.cache_clear()


def test_the_same_settings_share_one_live_connection(emulator: Emulator) -> None:
    first = core.connect(emulator.connection_string)
    assert core.connect(emulator.connection_string) is first
    core.peek("q", connection=emulator.connection_string)  # a plain string finds it too
    assert first.links_opened >= 1
    assert "SAS_KEY_VALUE" not in repr(first)


def test_reconnects_once_after_the_emulator_restarts() -> None:
    port = free_port()
    first = Emulator(TEST_TOPOLOGY, port=port).start()
    conn = core.connect(first.connection_string)
    try:
        core.send("q", ["before"], connection=conn)
        assert len(core.peek("q", connection=conn)) == 1
        first.stop()
        with Emulator(TEST_TOPOLOGY, port=port) as second:
            assert second.connection_string == first.connection_string
            core.send("q", ["after"], connection=conn)
            assert [r["body_text"] for r in core.peek("q", connection=conn)] == ["after"]
            with core.receive("q", max_messages=1, connection=conn) as batch:
                assert batch.complete().count("completed") == 1
            assert conn.reconnects >= 1
    finally:
        conn.close()
        first.stop()


def test_unreachable_namespace_fails_with_one_clear_error() -> None:
    conn_str = (
        f"Endpoint=sb://127.0.0.1:{free_port()};SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true"
    )
    with core.connect(conn_str, warm=False) as conn, pytest.raises(core.SbError) as info:
        core.peek("q", connection=conn)
    assert "SAS_KEY_VALUE" not in str(info.value)


def test_concurrent_callers_from_threads(emulator: Emulator) -> None:
    conn = core.connect(emulator.connection_string)
    core.send("q", [f"m{i}" for i in range(50)], connection=conn)
    errors: list[BaseException] = []
    peeks: list[int] = []

    def worker(n: int) -> None:
        try:
            for _ in range(5):
                peeks.append(len(core.peek("q", max_messages=50, connection=conn)))
                assert core.send("once", [f"w{n}"], connection=conn).ok
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert peeks == [50] * 40
    assert len(core.peek("once", max_messages=100, connection=conn)) == 40


def test_close_then_use_again_reopens(emulator: Emulator) -> None:
    conn = LiveConnection(core.resolve(emulator.connection_string))
    core.send("q", ["x"], connection=conn)
    conn.close()
    assert conn.open_links == 0
    assert len(core.peek("q", connection=conn)) == 1
    conn.close()


def test_async_api_runs_on_the_connection_loop(emulator: Emulator) -> None:
    import asyncio

    async def main() -> int:
        report = await core.asend("q", ["a", "b"], connection=emulator.connection_string)
        pages = [p async for p in core.ascan("q", connection=emulator.connection_string)]
        return report.count("sent") + sum(len(p) for p in pages)

    assert asyncio.run(main()) == 4


def test_the_sdk_client_kept_open_is_what_we_compare_with(emulator: Emulator) -> None:
    """Sanity check for the benchmark's baseline: a plain SDK client also peeks warm."""
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_receiver("q") as r:
            assert r.peek_messages(5) == []


def test_idle_links_are_closed_and_reopened_on_demand(emulator: Emulator) -> None:

    conn = LiveConnection(core.resolve(emulator.connection_string), idle_timeout=0.3)
    try:
        core.send("q", ["x"], connection=conn)
        assert len(core.peek("q", connection=conn)) == 1
        assert conn.open_links >= 1
        deadline = time.monotonic() + HANG
        while conn.open_links and time.monotonic() < deadline:
            time.sleep(0.1)
        assert conn.open_links == 0
        assert len(core.peek("q", connection=conn)) == 1  # opened again when needed
    finally:
        conn.close()


def test_connect_checks_the_key_and_the_namespace(emulator: Emulator) -> None:
    wrong = emulator.connection_string.replace("SAS_KEY_VALUE", "not-the-key")
    with pytest.raises(core.ConfigurationError) as info:
        core.connect(wrong)
    assert "not-the-key" not in str(info.value)
    nowhere = emulator.connection_string.replace(f":{emulator.port}", f":{free_port()}")
    with pytest.raises(core.SbError, match="Cannot reach"):
        core.connect(nowhere)
    conn = core.connect(emulator.connection_string)
    spares = conn.spares
    assert conn.warmed and spares is not None

    async def kept_or_lent() -> int:  # read on the loop: the warm-up lends spares meanwhile
        return spares.ready + spares.lent

    assert conn.run(kept_or_lent()) >= 1  # checked on a spare, kept (or lent to a warmed link)
    conn.settle()
    assert conn.links_opened >= 1  # receivers opened on the topology's entities, in the background


def test_a_reply_later_than_the_attempt_bound_is_a_retryable_error_not_a_wait(emulator: Emulator) -> None:
    """The SDK waits for a management reply with no bound unless given one, and can drop a reply
    that arrives before it has registered the request (tests/emulator/amqp/test_concurrency.py): the
    kit's client bounds every attempt (``try_timeout``), so a call ends in a reply or an error."""

    from sbnotebook.core import ServiceError

    core.send("q", ["x"], connection=emulator.connection_string)
    emulator.slow_down("q", latency_ms=2000)  # every reply on q's connections 2 s late
    bounded = LiveConnection(core.resolve(emulator.connection_string), try_timeout=0.8)
    patient = LiveConnection(core.resolve(emulator.connection_string), try_timeout=30)
    try:
        with pytest.raises(ServiceError) as err:  # not timed: a call that waited got the reply, no error
            core.peek("q", connection=bounded)
        assert err.value.retryable and "Timeout" in str(err.value)  # ended at the bound, before the late reply
        assert len(core.peek("q", connection=patient)) == 1  # within the bound: the reply is waited for
    finally:
        bounded.close()
        patient.close()


def test_a_reconnect_leaves_links_other_calls_hold_working(emulator: Emulator) -> None:
    """A reconnect replaces the SDK client. Closing the old one would shut down every handler it
    made, so a batch still held (or a send being retried) failed with "the handler has already been
    shutdown" because some other call had reconnected: seen when connect()'s background warm-up
    met a broker restart. The old client is retired instead, and closed with the live connection."""
    conn = core.connect(emulator.connection_string, warm=False)
    core.send("q", ["held"], connection=conn)
    with core.receive("q", max_messages=1, connection=conn) as batch:
        conn.run(conn.reconnect())  # another call's reconnect, while this batch holds its receiver
        assert batch.complete().count("completed") == 1
    assert conn.reconnects == 1
    assert emulator.broker.counts("q")["active"] == 0


def test_sends_that_meet_one_outage_together_reconnect_once() -> None:
    """Each send opening its first sender during an outage used to reconnect on its own: one
    outage, as many reconnects as sends. A send now reconnects only if no other call has since it
    began (``LiveConnection.generation``)."""
    port = free_port()
    first = Emulator(TEST_TOPOLOGY, port=port).start()
    conn = core.connect(first.connection_string, warm=False)
    queues = ["fwd-dst", "dl-target", "once", "dedup"]  # never sent to: no sender pooled for them (none expires)
    try:
        core.send("q", ["before"], connection=conn)
        first.stop()
        before = conn.reconnects
        sends = [conn.spawn(core.asend(q, [f"to {q}"], connection=conn)) for q in queues]
        wait_until(lambda: conn.reconnects > before)  # the outage met: a send reconnected
        settled(lambda: conn.reconnects)  # and the others' failures landed (each reconnected, before the fix)
        with Emulator(TEST_TOPOLOGY, port=port) as second:
            reports = [s.result(timeout=60) for s in sends]
            assert all(r.count("sent") == 1 for r in reports), reports
            assert conn.reconnects - before == 1
            assert [second.broker.counts(q)["active"] for q in queues] == [1, 1, 1, 1]
    finally:
        conn.close()
        first.stop()


def test_a_client_that_never_reached_the_broker_is_not_replaced() -> None:
    """A send that starts after another call's reconnect, while the broker is still down, used to
    reconnect again (two reconnects for one outage, when the sends were spawned one by one): its
    client was made during the outage and had never opened a link, so replacing it changes
    nothing. Nothing listens on the port here: every client is such a client."""
    conn = core.connect(
        f"Endpoint=sb://127.0.0.1:{free_port()};SharedAccessKeyName=k;SharedAccessKey=x;UseDevelopmentEmulator=true",
        warm=False,
    )
    try:
        with pytest.raises(core.ServiceError):
            core.send("q", ["never"], connection=conn)
        assert conn.reconnects == 0
    finally:
        conn.close()
