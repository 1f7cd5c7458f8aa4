"""The AMQP port also serves AMQP over WebSockets and the administration API (HTTP)."""

from __future__ import annotations

import asyncio
import signal
import socket
import urllib.request
from pathlib import Path
from urllib.error import HTTPError

import pytest
from azure.servicebus import ServiceBusMessage
from azure.servicebus import ServiceBusReceiveMode as Mode

from sbnotebook.core.admin import emulator_admin_client
from sbnotebook.core.websockets import websocket_options
from sbnotebook.emulator import Emulator
from tests.helpers import QuickCloseClient, drain, send, start_cli_emulator

pytestmark = pytest.mark.timeout(120)


def test_websocket_send_receive_peek(emulator: Emulator) -> None:
    """Rule: TransportType.AmqpOverWebsocket reaches the emulator at ws://host:port/$servicebus/websocket."""
    with QuickCloseClient.from_connection_string(
        emulator.connection_string, **websocket_options(emulator.connection_string)
    ) as c:
        with c.get_queue_sender("q") as s:
            s.send_messages([ServiceBusMessage(f"ws-{i}") for i in range(3)])
            s.send_messages(ServiceBusMessage("x" * 100_000))  # bigger than one websocket length byte
        with c.get_queue_receiver("q", max_wait_time=5) as r:
            peeked = r.peek_messages(max_message_count=10, sequence_number=1)
            assert [str(m) for m in peeked][:3] == ["ws-0", "ws-1", "ws-2"]
            got = r.receive_messages(max_message_count=4, max_wait_time=5)
            assert [str(m) for m in got][:3] == ["ws-0", "ws-1", "ws-2"]
            assert len(str(got[3])) == 100_000
            for m in got:
                r.complete_message(m)
    assert emulator.broker.counts("q")["active"] == 0


def test_websocket_async(emulator: Emulator) -> None:
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    async def run() -> list[str]:
        async with AsyncClient.from_connection_string(
            emulator.connection_string, **websocket_options(emulator.connection_string)
        ) as c:
            async with c.get_queue_sender("q") as s:
                await s.send_messages([ServiceBusMessage("a1"), ServiceBusMessage("a2")])
            async with c.get_queue_receiver("q", max_wait_time=5) as r:
                peeked = await r.peek_messages(max_message_count=5, sequence_number=1)
                assert len(peeked) == 2
                got = await r.receive_messages(max_message_count=2, max_wait_time=5)
                for m in got:
                    await r.complete_message(m)
                return [str(m) for m in got]

    assert asyncio.run(run()) == ["a1", "a2"]
    assert emulator.broker.counts("q")["active"] == 0


def test_plain_and_websocket_clients_share_a_queue(emulator: Emulator) -> None:
    with QuickCloseClient.from_connection_string(emulator.connection_string) as plain:
        send(plain, "q", "from-tcp")
    with QuickCloseClient.from_connection_string(
        emulator.connection_string, **websocket_options(emulator.connection_string)
    ) as ws:
        with ws.get_queue_receiver("q", receive_mode=Mode.RECEIVE_AND_DELETE, max_wait_time=5) as r:
            assert [str(m) for m in r.receive_messages(max_wait_time=5)] == ["from-tcp"]


def test_admin_client_on_the_amqp_port(emulator: Emulator) -> None:
    """Rule: the administration API answers on the AMQP port, same handlers and same SAS auth."""
    assert emulator.port is not None
    with emulator_admin_client(emulator.connection_string) as admin:  # no admin port: the AMQP port
        admin.create_queue("made-on-amqp-port")
        with QuickCloseClient.from_connection_string(emulator.connection_string) as c:
            send(c, "made-on-amqp-port", "hello")
            assert admin.get_queue_runtime_properties("made-on-amqp-port").active_message_count == 1
            assert [str(m) for m in drain(c, "made-on-amqp-port")] == ["hello"]
    with pytest.raises(HTTPError) as err:
        urllib.request.urlopen(f"http://127.0.0.1:{emulator.port}/q?api-version=2021-05", timeout=5)
    assert err.value.code == 401


def test_admin_on_the_amqp_port_without_an_admin_port() -> None:
    with Emulator(admin_port=None) as emu:
        assert emu.admin_port is None
        with emulator_admin_client(emu.connection_string) as admin:
            assert "orders" in [q.name for q in admin.list_queues()]


def test_unknown_http_upgrade_and_garbage_do_not_disturb_amqp(emulator: Emulator) -> None:
    assert emulator.port is not None
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=5) as s:
        s.sendall(
            b"GET /$servicebus/websocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Protocol: chat\r\n\r\n"
        )
        assert s.recv(100).startswith(b"HTTP/1.1 400")
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 401")
    with QuickCloseClient.from_connection_string(emulator.connection_string) as c:
        send(c, "q", "still fine")
        assert [str(m) for m in drain(c, "q")] == ["still fine"]


def test_cli_emulator_serves_admin_and_websockets_on_its_amqp_port() -> None:
    proc, conn = start_cli_emulator("--port", "0")
    try:
        with emulator_admin_client(conn) as admin:
            admin.create_queue("cli-made")
            assert admin.get_queue("cli-made").name == "cli-made"
        with QuickCloseClient.from_connection_string(conn, **websocket_options(conn)) as c:
            send(c, "cli-made", "over ws")
            assert [str(m) for m in drain(c, "cli-made")] == ["over ws"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)


def test_cli_with_data_dir_serves_admin_on_its_amqp_port(tmp_path: Path) -> None:
    proc, conn = start_cli_emulator("--port", "0", "--data-dir", str(tmp_path))
    try:
        with emulator_admin_client(conn) as admin:
            assert admin.get_queue_runtime_properties("orders").active_message_count == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)


def test_async_admin_client_on_the_amqp_port(emulator: Emulator) -> None:
    from sbnotebook.core.admin import emulator_admin_client

    async def run() -> list[str]:
        async with emulator_admin_client(emulator.connection_string, aio=True) as admin:
            await admin.create_queue("made-async")
            return [q.name async for q in admin.list_queues()]

    assert "made-async" in asyncio.run(run())
