"""The AMQP port also serves AMQP over WebSockets and the administration API (HTTP)."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys
import urllib.request
from pathlib import Path
from urllib.error import HTTPError

import pytest
from azure.servicebus import ServiceBusMessage
from azure.servicebus import ServiceBusReceiveMode as Mode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.core.sdk.websockets import websocket_options
from sbnotebook.emulator import Emulator
from tests.emulator.net.rawpeers import SASL_HEADER, UPGRADE, connect, masked, upgrade
from tests.helpers import QuickCloseClient, drain, send
from tests.processes import start_cli_emulator

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
    from sbnotebook.core.sdk.admin import emulator_admin_client

    async def run() -> list[str]:
        async with emulator_admin_client(emulator.connection_string, aio=True) as admin:
            await admin.create_queue("made-async")
            return [q.name async for q in admin.list_queues()]

    assert "made-async" in asyncio.run(run())


# ---------------------------------------------------------------- the WebSocket framing (wsproto)

WS_PATH = "/$servicebus/websocket"


def _upgraded(port: int) -> socket.socket:
    s = connect(port)
    head = upgrade(s)
    assert b"Sec-WebSocket-Protocol: AMQPWSB10" in head, head
    assert head.endswith(b"\r\n\r\n")  # nothing else until the client speaks
    return s


def _server_frames_until_eof(s: socket.socket) -> list[tuple[int, bytes]]:
    """Every frame the server sends until it closes the socket (a socket timeout fails the test)."""
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    frames, pos = [], 0
    while pos < len(data):
        b0, b1 = data[pos], data[pos + 1]
        assert not b1 & 0x80, "server frames are never masked"
        n, pos = b1 & 0x7F, pos + 2
        if n == 126:
            n, pos = int.from_bytes(data[pos : pos + 2], "big"), pos + 2
        elif n == 127:
            n, pos = int.from_bytes(data[pos : pos + 8], "big"), pos + 8
        frames.append((b0 & 0x0F, data[pos : pos + n]))
        pos += n
        assert pos <= len(data), "a frame cut short"
    return frames


def _close_code(frames: list[tuple[int, bytes]]) -> int:
    closes = [payload for opcode, payload in frames if opcode == 0x8]
    assert len(closes) == 1 and frames[-1][0] == 0x8, frames  # one close frame, the last thing sent
    return int.from_bytes(closes[0][:2], "big")


def _still_serves_websocket_clients(emulator: Emulator) -> None:
    with QuickCloseClient.from_connection_string(
        emulator.connection_string, **websocket_options(emulator.connection_string)
    ) as c:
        send(c, "q", "after")
        assert [str(m) for m in drain(c, "q")] == ["after"]


def test_websocket_fragments_pings_and_the_close_handshake(emulator: Emulator) -> None:
    """Rule (RFC 6455): a message in fragments is one message, a ping between them is answered with
    its payload at once, and a close is answered with the client's code before the socket closes.
    The client is websocket-client, the library the SDK's AmqpOverWebsocket runs on."""
    import websocket

    assert emulator.port is not None
    ws = websocket.create_connection(f"ws://127.0.0.1:{emulator.port}{WS_PATH}", subprotocols=["AMQPWSB10"], timeout=5)
    try:
        assert (ws.getsubprotocol() or "").upper() == "AMQPWSB10"  # websocket-client lower-cases it
        ws.send_frame(websocket.ABNF.create_frame(SASL_HEADER[:3], websocket.ABNF.OPCODE_BINARY, fin=0))
        ws.ping(b"are you there")
        ws.send_frame(websocket.ABNF.create_frame(SASL_HEADER[3:], websocket.ABNF.OPCODE_CONT, fin=1))
        opcode, frame = ws.recv_data_frame(control_frame=True)
        assert (opcode, frame.data) == (websocket.ABNF.OPCODE_PONG, b"are you there")
        opcode, frame = ws.recv_data_frame(control_frame=True)
        assert opcode == websocket.ABNF.OPCODE_BINARY
        assert frame.data.startswith(SASL_HEADER)  # proton got the joined header and answered
        ws.send_close(status=1000, reason=b"bye")
        # Read the answer off the socket: websocket-client would answer the server's close again.
        assert ws.sock is not None
        assert _close_code(_server_frames_until_eof(ws.sock)) == 1000  # then the server closes the socket
    finally:
        ws.shutdown()
    _still_serves_websocket_clients(emulator)


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        pytest.param(b"\x82\x08" + SASL_HEADER, 1002, id="unmasked client frame"),
        pytest.param(masked(0x09, b"x"), 1002, id="ping not final"),
        pytest.param(masked(0x80, SASL_HEADER), 1002, id="continuation with nothing to continue"),
        pytest.param(masked(0x83, SASL_HEADER), 1002, id="reserved opcode"),
        pytest.param(masked(0xC2, SASL_HEADER), 1002, id="RSV1 without an extension"),
        pytest.param(masked(0x89, b"p" * 126), 1002, id="control frame over 125 bytes"),
        pytest.param(masked(0x88, (999).to_bytes(2, "big")), 1002, id="close code out of range"),
        pytest.param(masked(0x81, b"AMQP"), 1003, id="text message"),
    ],
)
def test_websocket_frames_that_break_the_rfc_are_refused_with_a_close_frame(
    emulator: Emulator, frame: bytes, code: int
) -> None:
    """Rule (RFC 6455 section 7.4): a frame the RFC forbids gets a close frame with its code (1002
    protocol error; 1003 for a text message: AMQPWSB10 carries binary only), then the socket closes.
    Nothing reaches proton, and other clients go on."""
    assert emulator.port is not None
    with _upgraded(emulator.port) as s:
        s.sendall(frame)
        frames = _server_frames_until_eof(s)
    assert _close_code(frames) == code
    assert all(opcode == 0x8 for opcode, _ in frames), frames  # no AMQP answer: proton saw nothing
    _still_serves_websocket_clients(emulator)


def test_websocket_upgrade_without_the_version_is_refused(emulator: Emulator) -> None:
    """Rule (RFC 6455 section 4.2.2): an upgrade without Sec-WebSocket-Version: 13 is refused (426
    with the version the server speaks, or 400 when none is named)."""
    assert emulator.port is not None
    for version, status in ((b"Sec-WebSocket-Version: 8\r\n", b"426"), (b"", b"400")):
        with socket.create_connection(("127.0.0.1", emulator.port), timeout=5) as s:
            s.sendall(UPGRADE.replace(b"Sec-WebSocket-Version: 13\r\n", version))
            reply = b""
            while chunk := s.recv(1024):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 " + status), reply
    _still_serves_websocket_clients(emulator)


def test_without_wsproto_an_upgrade_gets_503_and_amqp_is_still_served(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An environment made before wsproto was a dependency: the loop imports websocket.py on the first
    upgrade, so an upgrade is refused with 503 and a log line naming the package, and plain AMQP is
    served as before."""
    assert emulator.port is not None
    monkeypatch.setitem(sys.modules, "wsproto", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "sbnotebook.emulator.net.websocket", raising=False)  # imported again
    with caplog.at_level(logging.ERROR, logger="sbnotebook.emulator"):
        with socket.create_connection(("127.0.0.1", emulator.port), timeout=5) as s:
            s.sendall(UPGRADE)
            reply = b""
            while chunk := s.recv(1024):
                reply += chunk
    assert reply.startswith(b"HTTP/1.1 503 "), reply
    assert any("pip install wsproto" in r.getMessage() for r in caplog.records), caplog.records
    with QuickCloseClient.from_connection_string(emulator.connection_string) as c:
        send(c, "q", "plain")
        assert [str(m) for m in drain(c, "q")] == ["plain"]


_frames = st.lists(
    st.tuples(st.integers(0, 255), st.binary(max_size=40), st.booleans()).map(
        lambda f: masked(f[0], f[1]) if f[2] else bytes([f[0], len(f[1])]) + f[1]
    ),
    max_size=6,
).map(b"".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(junk=_frames | st.binary(max_size=200))
def test_websocket_junk_never_disturbs_the_broker(emulator: Emulator, junk: bytes) -> None:
    """Any bytes after a valid upgrade (frames of any first byte, masked or not, or noise): the
    server answers only with well-formed frames, closes the socket once the client is done, and
    keeps serving AMQP."""
    assert emulator.port is not None
    with _upgraded(emulator.port) as s:
        s.sendall(junk)
        s.shutdown(socket.SHUT_WR)
        frames = _server_frames_until_eof(s)  # parses every frame: none cut short, none masked
    assert [opcode for opcode, _ in frames if opcode not in (0x2, 0x8, 0xA)] == []  # binary, close, pong
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=5) as s:
        s.sendall(SASL_HEADER)
        assert s.recv(8) == SASL_HEADER
