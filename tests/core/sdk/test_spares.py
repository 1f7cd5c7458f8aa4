"""Spare AMQP connections (``core/sdk/spares.py`` ``SpareConnections``): a live connection keeps two
connections opened ahead of need, their session begun and CBS links attached, and the next SDK
link opens on one of them, so a new entity costs the token, the attach and the call. Against the
embedded emulator with the real SDK; round trips are counted in benchmarks/interactive_latency.py."""

from __future__ import annotations

import asyncio
import gc
import inspect
import threading
import time
import warnings
from typing import Any

import pytest
from azure.servicebus._pyamqp.aio._client_async import AMQPClientAsync

from sbnotebook import core
from sbnotebook.core.connections.live import CHECK_ENTITY, SPARE_CONNECTIONS
from sbnotebook.core.sdk import spares as sdk_spares
from sbnotebook.emulator import Emulator
from tests.conftest import TEST_TOPOLOGY
from tests.processes import free_port, server_sockets
from tests.waiting import HANG


def test_the_sdks_open_still_does_what_a_spare_stands_in_for() -> None:
    """``_give`` repeats the tail of the SDK's ``open_async``; a new SDK that changes it
    must fail here, not open clients that miss a step."""
    source = inspect.getsource(AMQPClientAsync.open_async)
    for line in sdk_spares.SPARE_OPEN_TAIL:
        assert line in source, f"AMQPClientAsync.open_async no longer has {line!r}"


def _ready(conn: core.LiveConnection) -> int:
    conn.settle()
    assert conn.spares is not None
    return conn.spares.ready


def test_a_new_entity_opens_on_a_spare_and_closing_leaves_no_connection(emulator: Emulator) -> None:
    assert emulator.port is not None
    conn = core.connect(emulator.connection_string, warm=False)
    core.send("q", ["in q"], connection=conn)  # its own connection: nothing to copy settings from yet
    assert _ready(conn) == SPARE_CONNECTIONS
    assert conn.spares is not None and conn.spares.lent == 0
    core.send("once", ["sent on a spare"], connection=conn)
    assert [r["body_text"] for r in core.peek("once", connection=conn)] == ["sent on a spare"]
    assert conn.spares.lent == 2  # the sender, then the receiver
    with core.receive("once", max_messages=1, connection=conn) as batch:  # the pooled receiver: no spare
        assert batch.complete().count("completed") == 1
    assert conn.spares.lent == 2
    assert _ready(conn) == SPARE_CONNECTIONS  # opened again in the background
    conn.close()
    deadline = time.monotonic() + HANG
    while server_sockets(emulator.port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server_sockets(emulator.port)  # spares closed with the live connection


def test_a_spare_puts_the_links_own_token_so_a_wrong_key_still_fails_with_the_key_error(emulator: Emulator) -> None:
    wrong = emulator.connection_string.replace("SAS_KEY_VALUE", "not-the-key")
    conn = core.connect(wrong, warm=False)
    with pytest.raises(core.ConfigurationError):
        core.peek("q", connection=conn)
    assert _ready(conn) >= 1  # a spare opens (no token on it yet)
    with pytest.raises(core.ConfigurationError) as info:
        core.peek("once", connection=conn)
    assert conn.spares is not None and conn.spares.lent == 1
    assert "check the key" in str(info.value) and "not-the-key" not in str(info.value)


def test_connect_checks_the_key_on_a_spare_that_the_next_link_uses(emulator: Emulator) -> None:
    """``connect()`` puts a token for an entity that need not exist (``LiveConnection.check``). The
    spare it did that on is lent to the next link, which must put its own token: the broker
    refuses an attach that no token of the connection covers."""
    conn = core.connect(emulator.connection_string, warm=False)
    conn.check()
    assert conn.spares is not None and conn.spares.ready >= 1
    core.send("ttl-drop", ["x"], connection=conn)  # on the spare the check used (the first ready)
    assert conn.spares.lent == 1
    assert emulator.broker.counts("ttl-drop")["active"] == 1


def test_spares_the_service_closed_are_dropped_not_lent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk_spares, "SPARE_KEEP_INTERVAL", 0.2)
    port = free_port()
    first = Emulator(TEST_TOPOLOGY, port=port).start()
    conn = core.connect(first.connection_string, warm=False)
    try:
        core.peek("q", connection=conn)
        assert _ready(conn) == SPARE_CONNECTIONS and conn.spares is not None
        first.stop()  # every connection to it ends
        with Emulator(TEST_TOPOLOGY, port=port) as second:
            deadline = time.monotonic() + HANG
            while conn.spares.dropped < SPARE_CONNECTIONS and time.monotonic() < deadline:
                time.sleep(0.05)
            assert conn.spares.dropped == SPARE_CONNECTIONS and conn.spares.lent == 0
            assert _ready(conn) == SPARE_CONNECTIONS  # opened again, to the new broker
            core.send("once", ["after the restart"], connection=conn)  # a new entity: a fresh spare
            assert second.broker.counts("once")["active"] == 1
            assert conn.reconnects == 0  # no dead spare was lent
    finally:
        conn.close()
        first.stop()


def _audiences(emulator: Emulator) -> list[str]:
    """The audience of every token the broker holds, on every connection (what the broker saw)."""
    return [g.audience for state in emulator._handler._conns.values() for g in state.grants]


def test_a_spare_holds_a_token_for_the_namespace_and_a_new_entity_needs_no_token_of_its_own(
    emulator: Emulator,
) -> None:
    """With a key, spares put a token for the whole namespace when they open: a link lent one
    attaches at once (the emulator, like Service Bus, refuses an attach that no token covers)."""
    conn = core.connect(emulator.connection_string, warm=False)
    core.send("q", ["template"], connection=conn)
    assert _ready(conn) == SPARE_CONNECTIONS and conn.spares is not None
    namespace = f"{emulator.address}:{emulator.port}".lower()
    assert _audiences(emulator).count(namespace) == SPARE_CONNECTIONS
    core.send("tiny", ["on a covered spare"], connection=conn)
    assert [r["body_text"] for r in core.peek("tiny", connection=conn)] == ["on a covered spare"]
    assert conn.spares.covered == conn.spares.lent == 2  # the sender, then the receiver
    assert not [a for a in _audiences(emulator) if a.endswith("/tiny")]  # no token put for the entity
    conn.close()


def test_connect_checks_the_key_with_the_namespace_token(emulator: Emulator) -> None:
    conn = core.connect(emulator.connection_string)  # check(): a spare and its token, then warm-up
    conn.settle()
    namespace = f"{emulator.address}:{emulator.port}".lower()
    assert namespace in _audiences(emulator)
    assert not [a for a in _audiences(emulator) if a.endswith(CHECK_ENTITY)]  # nothing put for it
    # The warm-up's first links were lent the spares (the others open connections of their own).
    assert conn.spares is not None and conn.spares.covered >= 1
    conn.close()


@pytest.mark.parametrize("websockets", [False, True], ids=["amqp", "websockets"])
def test_a_spare_still_opening_when_the_connection_closes_is_closed_too(emulator: Emulator, websockets: bool) -> None:
    """Closing cancels the spares being opened. One cancelled while its namespace token is put (a
    round trip after its connection opened) was dropped unclosed: a socket or, over WebSockets,
    aiohttp's 'Unclosed client session' when it was collected. Held there on purpose (the token's
    maker never answers), then closed: nothing may be left for the collector to warn about."""
    assert emulator.port is not None
    conn = core.connect(emulator.connection_string, warm=False, websockets=websockets)
    core.send("q", ["x"], connection=conn)  # its own connection; spares open after it
    assert _ready(conn) == SPARE_CONNECTIONS and conn.spares is not None
    entered = threading.Event()

    async def never() -> Any:  # the namespace token's maker: the spare's open stops there
        entered.set()
        await asyncio.Event().wait()

    conn.spares._namespace_auth = never
    core.send("once", ["on a spare"], connection=conn)  # lends one: another opens, and stops at its token
    assert entered.wait(HANG)
    # What earlier tests in this process left for the collector is collected first: only what this
    # close leaves may count (a full run found two transports of a closed loop there).
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        conn.close()
        deadline = time.monotonic() + HANG
        while server_sockets(emulator.port) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not server_sockets(emulator.port)  # closed, not waiting for the collector
        gc.collect()
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaked == []
