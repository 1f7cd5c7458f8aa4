"""The port under load and attack: Azure's connection cap (the connection over it refused with
Service Bus's error, the SDK failing at once, served again once others close), deadlines for peers
that stall at each stage (protocol header, TLS handshake, SASL, a WebSocket upgrade) and Service
Bus's idle deadlines for connections without links, each closed peer logged once with why; TLS and
WebSockets held without a thread per connection; HTTP connections held with a bounded number."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import re
import resource
import socket
import ssl
import struct
import subprocess
import sys
import termios
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, TransportType
from azure.servicebus.exceptions import ServiceBusConnectionError

from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator
from sbnotebook.emulator.net.limits import Deadlines
from tests.emulator.net.rawpeers import (
    SASL_HEADER,
    UPGRADE,
    RawAmqp,
    closed_by_server,
    connect,
    open_now,
    tls_peer,
    websocket_peer,
)
from tests.helpers import QuickCloseClient, drain, send, tls_client_options
from tests.processes import start_cli_emulator
from tests.waiting import settled, wait_until

HANDSHAKE = 2.0  # seconds: the tests' deadline for a peer to open (the default is 30)


@pytest.fixture
def emulator_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="sbnotebook.emulator")
    return caplog


def _closed_lines(caplog: pytest.LogCaptureFixture) -> Counter[str]:
    """How many times each peer address was logged as closed."""
    found = (re.match(r"closed (\S+): ", r.getMessage()) for r in caplog.records)
    return Counter(m.group(1) for m in found if m)


def _address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"{host}:{port}"


def _sdk_round_trip(client: ServiceBusClient, body: str) -> None:
    send(client, "orders", body)
    assert [str(m) for m in drain(client, "orders")] == [body]


# ------------------------------------------------------------------ the cap


def test_the_connection_over_the_cap_is_refused_at_once_and_served_again_after_others_close(
    emulator_log: pytest.LogCaptureFixture,
) -> None:
    """Rule: connections count from their protocol header, plain and WebSockets alike; the one over
    the cap gets Service Bus's refusal (amqp:resource-limit-exceeded), which the SDK raises at once,
    with or without retries; the administration API does not count; one closed, one served."""
    with Emulator(max_connections=3) as emu, contextlib.ExitStack() as held:
        assert emu.port is not None and emu.max_connections == 3
        for _ in range(2):
            held.enter_context(connect(emu.port)).sendall(SASL_HEADER)
        held.enter_context(websocket_peer(connect(emu.port)))
        wait_until(lambda: emu.connections == 3)
        # Retries on, each after 20 s: one retry would show far above any machine's slowness.
        for retries in ({"retry_total": 0}, {"retry_backoff_factor": 20}):
            started = time.monotonic()
            with QuickCloseClient.from_connection_string(emu.connection_string, **retries) as c:
                with pytest.raises(ServiceBusConnectionError) as refused:
                    send(c, "orders", "over the cap")
            assert time.monotonic() - started < 15  # an error at once, not a hang or a retry loop
            assert "ConnectionsQuotaExceeded for namespace" in str(refused.value)
            assert "amqp:resource-limit-exceeded" in str(refused.value)
        with emulator_admin_client(emu.connection_string) as admin:  # REST is not an AMQP connection
            assert admin.get_queue_runtime_properties("orders").active_message_count == 0
        held.close()  # the three go: new clients are served again
        wait_until(lambda: emu.connections == 0)
        with QuickCloseClient.from_connection_string(emu.connection_string) as c:
            _sdk_round_trip(c, "under the cap again")
    refusals = [r for r in emulator_log.records if "over the connection cap of 3" in r.getMessage()]
    assert len(refusals) == 2 and all(r.levelno == logging.WARNING for r in refusals)


def test_the_refusal_is_an_open_then_a_close_with_service_bus_words() -> None:
    with Emulator(max_connections=1) as emu, connect(emu.port or 0) as holder:
        holder.sendall(SASL_HEADER)
        wait_until(lambda: emu.connections == 1)
        peer = RawAmqp(emu.port or 0)
        try:
            assert peer.pump(lambda: peer.closed, 5)
            assert peer.opened  # the open answered first, as AMQP requires before a close
            assert peer.condition is not None and peer.condition.name == "amqp:resource-limit-exceeded"
            assert (peer.condition.description or "").startswith("ConnectionsQuotaExceeded for namespace ")
            assert "TrackingId:" in (peer.condition.description or "")
        finally:
            peer.close()
    with pytest.raises(ValueError, match="max_connections"):
        Emulator(max_connections=0)


def test_the_status_path_needs_a_token(emulator: Emulator) -> None:
    """``/$emulator/status`` (what ``--status`` shows) answers only a caller with the Manage right."""
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://127.0.0.1:{emulator.port}/$emulator/status", timeout=5)
    assert refused.value.code == 401


def test_the_command_line_cap(tmp_path: Path) -> None:
    proc, conn = start_cli_emulator("--port", "0", "--max-connections", "1")
    try:
        port = int(conn.split(";")[0].rsplit(":", 1)[1])
        with connect(port) as holder:
            holder.sendall(SASL_HEADER)
            assert holder.recv(8) == SASL_HEADER  # counted and being served
            with QuickCloseClient.from_connection_string(conn, retry_total=0) as c:
                with pytest.raises(ServiceBusConnectionError, match="ConnectionsQuotaExceeded"):
                    send(c, "orders", "over the cap")
    finally:
        proc.terminate()
        proc.communicate(timeout=15)


# ---------------------------------------------------------------- deadlines


def _client_hello() -> bytes:
    """The first bytes of a real TLS handshake (a ClientHello)."""
    client = ssl.create_default_context().wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO(), server_hostname="x")
    with contextlib.suppress(ssl.SSLWantReadError):
        client.do_handshake()
    return out.read()


def _stalled_plain(port: int) -> list[socket.socket]:
    peers = [connect(port) for _ in range(5)]
    peers[0].sendall(SASL_HEADER[:3])  # half a protocol header
    peers[1].sendall(SASL_HEADER)  # a header, then no SASL
    peers[2].sendall(UPGRADE[:40])  # half a WebSocket upgrade's head
    websocket_peer(peers[3])  # upgraded and a header, then no SASL
    return peers  # peers[4] says nothing at all


def _stalled_tls(port: int, ca: Path) -> list[socket.socket]:
    peers = [connect(port) for _ in range(2)]
    peers[1].sendall(_client_hello()[:20])  # a third of a handshake
    return [*peers, tls_peer(port, ca), tls_peer(port, ca, header=False)]


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_peers_that_stall_before_the_open_are_closed_and_logged_once(
    tls: bool, tmp_path: Path, emulator_log: pytest.LogCaptureFixture
) -> None:
    """Rule: a peer that has not opened its AMQP connection within Deadlines.handshake (TLS, the
    header, SASL, a WebSocket upgrade) is closed, each logged once with why; others are served."""
    with Emulator(tls=tls, tls_dir=tmp_path, deadlines=Deadlines(handshake=HANDSHAKE)) as emu:
        assert emu.port is not None
        started = time.monotonic()
        peers = _stalled_tls(emu.port, emu.ca_file or tmp_path) if tls else _stalled_plain(emu.port)
        addresses = [_address(p) for p in peers]
        options = tls_client_options(emu.port, emu.ca_file) if tls else {}
        with QuickCloseClient.from_connection_string(emu.connection_string, **options) as c:
            _sdk_round_trip(c, "served while others stall")
        if time.monotonic() - started < HANDSHAKE - 0.5:
            assert all(open_now(p) for p in peers)  # not closed before their deadline
        for peer in peers:
            assert closed_by_server(peer, HANDSHAKE + 5), f"peer {peers.index(peer)} still open"
            peer.close()
    lines = _closed_lines(emulator_log)
    assert all(lines[a] == 1 for a in addresses), lines
    said = " ".join(r.getMessage() for r in emulator_log.records)
    assert f"within {HANDSHAKE:g} s" in said
    assert ("TLS handshake" in said) == tls


def test_connections_without_links_are_closed_by_service_bus_idle_rules(
    emulator_log: pytest.LogCaptureFixture,
) -> None:
    """Rule (Service Bus's LinkTracker): no link within Deadlines.first_link of the open, or none for
    Deadlines.no_links after the last one closed: amqp:connection:forced with Service Bus's words.
    A token on $cbs alone is no link; an entity's link keeps the connection."""
    deadlines = Deadlines(first_link=1.0, no_links=1.5)
    with Emulator(deadlines=deadlines) as emu:
        port = emu.port or 0
        never, working = RawAmqp(port), RawAmqp(port)
        try:
            never.put_token("orders")
            working.put_token("orders")
            link = working.attach_sender("orders")
            started = time.monotonic()
            assert never.pump(lambda: never.closed, 6)
            assert time.monotonic() - started >= 0.5
            assert never.condition is not None and never.condition.name == "amqp:connection:forced"
            assert (never.condition.description or "").startswith(
                "The connection was inactive for more than the allowed 1000 milliseconds and is closed by "
                "container 'LinkTracker'."
            )
            assert not working.pump(lambda: working.closed, 2.5)  # its link keeps it past both deadlines
            link.close()  # type: ignore[attr-defined]
            detached = time.monotonic()
            assert working.pump(lambda: working.closed, 6)
            assert time.monotonic() - detached >= 1.0
            assert working.condition is not None and "allowed 1500 milliseconds" in (
                working.condition.description or ""
            )
        finally:
            never.close()
            working.close()
    said = [r.getMessage() for r in emulator_log.records if "idle rule" in r.getMessage()]
    assert len(said) == 2 and any("no link for 1 s" in s for s in said) and any("1.5 s" in s for s in said)


def test_deadlines_must_be_positive() -> None:
    with pytest.raises(ValueError, match="handshake"):
        Deadlines(handshake=0)


# ------------------------------------------------------------ many at once


@pytest.fixture
def descriptors() -> Iterator[None]:
    """Room for a thousand sockets and their peers in this one process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, max(soft, 4096))
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_five_hundred_tls_connections_hold_no_thread_each(tmp_path: Path, descriptors: None) -> None:
    """Rule: TLS is ended on the event loop: 500 idle TLS connections (handshake done, header said,
    20 of them AMQP over secure WebSockets) add no thread, and a new SDK client is served meanwhile."""
    with Emulator(tls=True, tls_dir=tmp_path) as emu:
        assert emu.port is not None and emu.ca_file is not None
        before = threading.active_count()
        peers = [tls_peer(emu.port, emu.ca_file) for _ in range(480)]
        peers += [websocket_peer(tls_peer(emu.port, emu.ca_file, header=False)) for _ in range(20)]
        try:
            wait_until(lambda: emu.connections == 500)
            assert threading.active_count() <= before + 1, [t.name for t in threading.enumerate()]
            for transport in (TransportType.Amqp, TransportType.AmqpOverWebsocket):
                options = tls_client_options(emu.port, emu.ca_file, transport)
                with QuickCloseClient.from_connection_string(emu.connection_string, **options) as c:
                    _sdk_round_trip(c, f"beside 500 over {transport.name}")
            assert threading.active_count() <= before + 1
        finally:
            for peer in peers:
                peer.close()
        wait_until(lambda: emu.connections == 0)


def test_http_connections_held_at_once_are_bounded(emulator: Emulator) -> None:
    """Rule: each HTTP connection on the port has a thread while it lasts, at most 64 at once: the
    next is answered 503 (the SDK's admin client retries it) and served once one closes."""
    assert emulator.port is not None
    before = threading.active_count()
    request = b"GET /orders HTTP/1.1\r\nHost: localhost\r\n\r\n"  # no token: a 401, and the connection stays

    def ask(sock: socket.socket) -> bytes:
        sock.sendall(request)
        return sock.recv(4096)

    with contextlib.ExitStack() as held:
        kept = [held.enter_context(connect(emulator.port)) for _ in range(64)]
        assert all(ask(s).startswith(b"HTTP/1.1 401") for s in kept)
        assert threading.active_count() <= before + 64
        with connect(emulator.port) as extra:
            assert ask(extra).startswith(b"HTTP/1.1 503")
        kept[0].close()

        def served() -> bool:  # a fresh connection, as the SDK's retry after 503 makes one
            with connect(emulator.port) as extra:
                answer = ask(extra)
            assert answer.startswith((b"HTTP/1.1 401", b"HTTP/1.1 503")), answer
            return answer.startswith(b"HTTP/1.1 401")

        # The closed connection's thread ends when it reads the close: until then the next is still 503
        # (the thread count is no signal: other threads of the process come and go).
        wait_until(served)


LOW_FD_EMULATOR = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from sbnotebook.emulator.cli import main
sys.exit(main(["--port", "0"]))
"""


def test_out_of_file_descriptors_it_rests_instead_of_spinning_then_serves_again() -> None:
    """Rule: when accept fails for want of file descriptors the loop stops watching the listener a
    moment (it would wake at once, forever), says so once, and serves again as connections close."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LOW_FD_EMULATOR, "64"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        conn = next(line.strip() for line in proc.stdout if line.startswith("Endpoint=sb://"))
        port = int(conn.split(";")[0].rsplit(":", 1)[1])
        peers = [connect(port) for _ in range(80)]  # more than it has descriptors for: the rest wait
        for peer in peers:
            peer.sendall(SASL_HEADER)
        emulator = psutil.Process(proc.pid)
        time.sleep(0.5)
        before = sum(emulator.cpu_times()[:2])
        time.sleep(2)
        assert sum(emulator.cpu_times()[:2]) - before < 0.5  # resting; spinning takes a core (~2 s)
        for peer in peers:
            peer.close()
        with QuickCloseClient.from_connection_string(conn) as c:
            _sdk_round_trip(c, "after the flood")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    assert err.count("out of file descriptors") == 1, err


def unread_bytes(sock: socket.socket) -> int:
    """What has arrived in ``sock``'s receive buffer and nobody has read (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


def test_a_peer_that_stops_reading_never_stalls_the_others(emulator: Emulator) -> None:
    """Rule: replies held back by latency for a peer whose socket is full wait for it to drain, without
    spinning; the loop serves everyone else meanwhile (a pass that kept retrying them never ended,
    once)."""
    emulator.latency_ms = 20
    with QuickCloseClient.from_connection_string(emulator.connection_string) as c:
        with c.get_queue_sender("q") as sender:
            for _ in range(100):
                sender.send_messages(ServiceBusMessage("x" * 200_000))
        peer = RawAmqp(emulator.port or 0)
        try:
            peer.put_token("q")
            peer.attach_receiver("q", 1000)  # 20 MB on their way, and the peer reads no more
            # The socket has filled once the bytes waiting in the peer's buffer stop growing (waited
            # for, not a fixed second a loaded machine may not have spent sending them yet).
            settled(lambda: unread_bytes(peer.sock))
            cpu = time.process_time()  # the emulator's loop is a thread of this process
            time.sleep(1)
            assert time.process_time() - cpu < 0.2  # it waits for the socket; spinning took 0.4-1 s
            send(c, "short", "served beside a full socket")  # a stalled loop: the drain finds nothing
            assert [str(m) for m in drain(c, "short")] == ["served beside a full socket"]
        finally:
            peer.close()
