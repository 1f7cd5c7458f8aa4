"""Peers that talk to the emulator's port below the SDK: sockets that stall at each stage (a part of
a protocol header, a TLS handshake, a WebSocket upgrade), TLS and WebSocket peers that only say
their protocol header, a minimal AMQP client on proton's engine that opens a connection and
links as the tests need and reads how the broker closes it, and the answer to a plain HTTP request
(the administration API as the SDK never calls it)."""

from __future__ import annotations

import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from proton import Condition, Connection, Delivery, Endpoint, Message, Transport

from sbnotebook.emulator.security.sas import DEFAULT_KEY, DEFAULT_KEY_NAME, sign

SASL_HEADER = b"AMQP\x03\x01\x00\x00"  # what an AMQP client says first
UPGRADE = (
    b"GET /$servicebus/websocket HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Protocol: AMQPWSB10\r\n\r\n"
)


def http_reply(request: urllib.request.Request, timeout: float = 10.0) -> tuple[int, str]:
    """The status and body of the answer to ``request``, a refusal (4xx, 5xx) as well."""
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def masked(first: int, payload: bytes, length: int | None = None) -> bytes:
    """A client WebSocket frame (masked, as RFC 6455 requires of clients): first byte (FIN, RSV bits,
    opcode), masked payload; ``length`` may lie."""
    key = b"\x01\x02\x03\x04"
    n = len(payload) if length is None else length
    head = bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big")
    return bytes([first]) + head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def connect(port: int, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def tls_peer(port: int, ca: Path, *, header: bool = True) -> ssl.SSLSocket:
    """A TLS connection, handshake done, that says the AMQP protocol header (or nothing) and no more."""
    context = ssl.create_default_context(cafile=str(ca))
    sock = context.wrap_socket(connect(port), server_hostname="localhost")
    if header:
        sock.sendall(SASL_HEADER)
    return sock


def upgrade(sock: socket.socket) -> bytes:
    """Ask for the WebSocket upgrade on ``sock``; the server's answer (101 asserted), read to its blank line."""
    sock.sendall(UPGRADE)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1024)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    return head


def websocket_peer(sock: socket.socket) -> socket.socket:
    """Upgrade ``sock`` to AMQP over WebSockets and say the protocol header in one binary message."""
    upgrade(sock)
    sock.sendall(masked(0x82, SASL_HEADER))
    return sock


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Read what the server sends until it closes the connection (True) or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    try:
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            if not sock.recv(65536):
                return True
    except (TimeoutError, ssl.SSLWantReadError):
        return False
    except (ConnectionResetError, ssl.SSLError, BrokenPipeError):
        return True
    return False


def open_now(sock: socket.socket) -> bool:
    """Whether the server has not closed ``sock`` (what it sent meanwhile is read and dropped)."""
    sock.setblocking(False)
    try:
        while sock.recv(65536):
            pass
        return False
    except (BlockingIOError, ssl.SSLWantReadError):
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


class RawAmqp:
    """An AMQP client on proton's engine over a blocking socket: SASL ANONYMOUS and the open at
    once; ``put_token`` and ``attach`` as asked; ``pump`` moves bytes until a condition holds."""

    def __init__(self, port: int) -> None:
        self.sock = connect(port)
        self.transport = Transport(Transport.CLIENT)
        self.transport.sasl().allowed_mechs("ANONYMOUS")
        self.connection = Connection()
        self.connection.container = "raw-peer"
        self.connection.hostname = "localhost"
        self.transport.bind(self.connection)
        self.connection.open()
        self.session = self.connection.session()
        self.session.open()
        self.port = port
        self._pending = bytearray()  # read, and not yet taken by proton

    def pump(self, until: Callable[[], bool], seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while not until() and (left := deadline - time.monotonic()) > 0:
            while (n := self.transport.pending()) > 0:
                self.sock.sendall(self.transport.peek(n) or b"")
                self.transport.pop(n)
            self.sock.settimeout(min(0.1, left))
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                data = b""
            if not data:
                self.transport.close_tail()
                break
            self._pending += data
            while self._pending and (room := self.transport.capacity()) > 0:  # proton takes what it has room for
                self.transport.push(self._pending[:room])
                del self._pending[:room]
        return until()

    @property
    def opened(self) -> bool:
        """The broker answered the open (its connection may be closed since)."""
        return not self.connection.state & Endpoint.REMOTE_UNINIT

    @property
    def closed(self) -> bool:
        return bool(self.connection.state & Endpoint.REMOTE_CLOSED)

    @property
    def condition(self) -> Condition | None:
        return self.connection.remote_condition

    def put_token(self, entity: str) -> None:
        """A SAS token for ``entity`` on ``$cbs``, taken (the broker accepts the transfer) before this returns."""
        cbs = self.session.sender("cbs")
        cbs.target.address = "$cbs"
        cbs.open()
        assert self.pump(lambda: cbs.credit > 0, 5), "no credit on $cbs"
        audience = f"sb://localhost/{entity}"  # as the SDK names it: no port
        token = sign(audience, DEFAULT_KEY_NAME, DEFAULT_KEY, time.time() + 300)
        request = Message(
            body=token,
            properties={"operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": audience},
        )
        delivery = cbs.delivery(b"t1")
        cbs.send(request.encode())
        cbs.advance()
        assert self.pump(lambda: delivery.remote_state == Delivery.ACCEPTED, 5), "the token was not taken"

    def attach_sender(self, entity: str) -> object:
        link = self.session.sender(f"send-{entity}")
        link.target.address = entity
        link.open()
        assert self.pump(lambda: bool(link.state & Endpoint.REMOTE_ACTIVE), 5), "the attach was not answered"
        return link

    def attach_receiver(self, entity: str, credit: int) -> object:
        """A receiver on ``entity`` granting ``credit`` (what arrives is read only while pumping)."""
        link = self.session.receiver(f"receive-{entity}")
        link.source.address = entity
        link.open()
        link.flow(credit)
        assert self.pump(lambda: bool(link.state & Endpoint.REMOTE_ACTIVE), 5), "the attach was not answered"
        return link

    def close(self) -> None:
        self.sock.close()
