"""Raw peers, below the SDK: connections that open (TCP, TLS, a WebSocket upgrade), say the AMQP
protocol header and then stay quiet, as an idle or leaked client does; and peers that stall in
the middle of the header."""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from pathlib import Path

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
UPGRADE = (
    b"GET /$servicebus/websocket HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Protocol: AMQPWSB10\r\n\r\n"
)
KINDS = ("plain", "tls", "websockets", "wss")


def _frame(payload: bytes) -> bytes:
    key = b"\x01\x02\x03\x04"
    return bytes([0x82, 0x80 | len(payload)]) + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def _upgrade(sock: socket.socket) -> None:
    sock.sendall(UPGRADE)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1024)
        if not chunk:
            raise ConnectionError("the upgrade was refused")
        head += chunk
    sock.sendall(_frame(SASL_HEADER))


def idle_peer(kind: str, port: int, ca: Path | None) -> socket.socket:
    """One connection of ``kind`` that says the protocol header and waits until the broker's answers."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as the SDK's: no wait on Nagle
    if kind in ("tls", "wss"):
        assert ca is not None
        sock = ssl.create_default_context(cafile=str(ca)).wrap_socket(sock, server_hostname="localhost")
    if kind in ("websockets", "wss"):
        _upgrade(sock)
    else:
        sock.sendall(SASL_HEADER)
    if not sock.recv(8):  # the broker's own header: it serves this connection
        raise ConnectionError("closed at once")
    return sock


def open_idle(kind: str, count: int, port: int, ca: Path | None) -> tuple[list[socket.socket], float]:
    """``count`` idle peers and the seconds they took to open, one after another."""
    started = time.perf_counter()
    peers = [idle_peer(kind, port, ca) for _ in range(count)]
    return peers, time.perf_counter() - started


def stalled(count: int, port: int) -> list[socket.socket]:
    """Peers that send half a protocol header and stop."""
    peers = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(SASL_HEADER[:4])
        peers.append(sock)
    return peers


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed ``sock`` (what it sent is read and dropped); never waits."""
    sock.setblocking(False)
    try:
        while sock.recv(65536):
            pass
        return True
    except (BlockingIOError, ssl.SSLWantReadError):
        return False
    except OSError:
        return True


def close_all(peers: list[socket.socket]) -> None:
    for sock in peers:
        with contextlib.suppress(OSError):
            sock.close()
