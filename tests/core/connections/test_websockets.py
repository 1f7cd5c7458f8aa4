"""The kit's own connections over AMQP over WebSockets (``connect(..., websockets=True)``), for
networks where port 5671 is blocked and only HTTP(S) goes out.

The emulator sits behind ``HttpOnlyProxy`` (tests/helpers.py), a stand-in for such a firewall: it forwards a connection
whose first bytes are an HTTP request (a WebSocket upgrade, the administration API) and closes one
that opens with the AMQP header. So a test passes only if every AMQP byte travelled inside WebSockets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from sbnotebook import core
from sbnotebook.core import ConfigurationError, SbError
from sbnotebook.emulator import Emulator
from tests.helpers import HttpOnlyProxy

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def firewall(emulator: Emulator) -> Iterator[HttpOnlyProxy]:
    assert emulator.port is not None
    proxy = HttpOnlyProxy(emulator.port)
    yield proxy
    proxy.close()


def test_plain_amqp_is_blocked_by_the_stand_in_firewall(emulator: Emulator, firewall: HttpOnlyProxy) -> None:
    """The check itself: without WebSockets the kit cannot get through, and says it cannot connect."""
    with pytest.raises(SbError):
        core.connect(firewall.connection_string(emulator))
    assert firewall.blocked >= 1


def test_send_peek_receive_settle_over_websockets(emulator: Emulator, firewall: HttpOnlyProxy) -> None:
    """Rule: ``connect(..., websockets=True)`` dials AMQP inside WebSockets: send, peek, receive and
    settle work where only HTTP gets through; the broker's own counts say what happened."""
    conn = core.connect(firewall.connection_string(emulator), websockets=True)
    assert conn.settings.websockets and "over WebSockets" in str(conn.settings)
    sent = core.send("q", [{"n": i} for i in range(5)], connection=conn)
    assert sent.count("sent") == 5
    page = core.peek("q", connection=conn)
    assert [json.loads(m["body"]) for m in page] == [{"n": i} for i in range(5)]
    batch = core.receive("q", max_messages=3, wait_seconds=5, connection=conn)
    assert len(batch) == 3
    assert batch.complete().count("completed") == 3
    assert emulator.broker.counts("q") == {"active": 2, "deferred": 0, "scheduled": 0, "dead_letter": 0}
    assert firewall.blocked == 0 and firewall.forwarded >= 1


def test_a_connection_string_asking_for_websockets_gets_them(emulator: Emulator, firewall: HttpOnlyProxy) -> None:
    """``TransportType=AmqpWebSockets`` in a connection string (the .NET SDK's setting) means WebSockets."""
    text = firewall.connection_string(emulator) + ";TransportType=AmqpWebSockets"
    conn = core.connect(text)
    assert conn.settings.websockets
    assert core.send("q", ["hello"], connection=conn).count("sent") == 1
    assert emulator.broker.counts("q")["active"] == 1 and firewall.blocked == 0


def test_websockets_and_plain_are_two_connections(emulator: Emulator) -> None:
    plain = core.resolve(emulator.connection_string)
    over = core.resolve(emulator.connection_string, websockets=True)
    assert plain != over and not plain.websockets and over.websockets
    assert core.resolve(over) == over  # a resolved connection keeps its transport
    assert core.live_connection(plain) is not core.live_connection(
        over
    )  # one live connection (one SDK client) per transport
    assert "websockets=True" in repr(over) and "SharedAccessKey" not in repr(over)


def test_without_aiohttp_the_error_names_the_extra(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's async WebSocket transport needs aiohttp: missing, one line says which extra installs it."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "aiohttp" else real(name, *a))
    with pytest.raises(ConfigurationError) as err:
        core.connect(emulator.connection_string, websockets=True)
    text = str(err.value)
    assert "\n" not in text and "aiohttp" in text and "[websockets]" in text
