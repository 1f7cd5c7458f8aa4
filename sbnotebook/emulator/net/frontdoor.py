"""One port, three protocols: tell AMQP from HTTP by the first bytes a client sends.

AMQP clients open with ``AMQP`` + protocol id; HTTP clients with a method name.
An HTTP request is either a WebSocket upgrade (AMQP inside, see ``websocket.py``)
or a call to the administration API (handed to ``admin/api.py``'s handlers). On a TLS port
the first bytes are those the TLS handshake (``tlsio.py``) decrypts.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import ssl
import time
from collections.abc import Callable

from .limits import Cap, Countdown, Deadlines
from .peerio import Peer, Sniffing, Wire
from .tlsio import TlsSocket

log = logging.getLogger("sbnotebook.emulator")

READ_SIZE = 256 * 1024
# Hands a plain HTTP connection (a blocking socket, the bytes already read) to the administration API.
HttpHandoff = Callable[[Wire, bytes], None]

AMQP = "amqp"
HTTP = "http"
MORE = "more"
_METHODS = (b"GET ", b"PUT ", b"POST ", b"DELETE ", b"HEAD ", b"OPTIONS ", b"PATCH ")
MAX_HEAD = 64 * 1024


def classify(buf: bytes) -> str:
    """AMQP, HTTP, or MORE (too few bytes to tell). Anything else is left to proton to refuse."""
    if buf[:4] == b"AMQP"[: len(buf)] and len(buf) < 4:
        return MORE
    for method in _METHODS:
        if buf.startswith(method):
            return HTTP
        if method.startswith(buf):
            return MORE
    return AMQP


def parse_head(buf: bytes) -> tuple[str, str, dict[str, str], int] | None:
    """(method, path, lower-cased headers, length of the head) once the head is complete, else None."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD:
            raise ValueError("HTTP request head too large")
        return None
    lines = buf[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise ValueError("malformed HTTP request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return parts[0], parts[1], headers, end + 4


WEBSOCKET_PATH = "/$servicebus/websocket"


def is_upgrade(path: str, headers: dict[str, str]) -> bool:
    """A WebSocket upgrade to Service Bus's AMQP path (``websocket.py`` answers it)."""
    return (
        path.split("?", 1)[0].lower() == WEBSOCKET_PATH.lower()
        and headers.get("upgrade", "").lower() == "websocket"
        and "sec-websocket-key" in headers
    )


class FrontDoor:
    """A new connection until its protocol is known: its TLS handshake (on a TLS port), then its
    first plain bytes route it to proton (AMQP), to a WebSocket peer, or to the administration API.
    A part of ``loop.EventLoop`` (its state and the steps it provides, declared here)."""

    selector: selectors.BaseSelector
    http: HttpHandoff | None
    tls_context: ssl.SSLContext | None
    deadlines: Deadlines
    cap: Cap
    _sniffing: dict[Wire, Sniffing]
    _opening: Countdown  # sockets that must reach the AMQP open within deadlines.handshake
    _add_peer: Callable[[Wire, str], Peer]
    _push: Callable[[Peer, bytes], None]
    _want_write: Callable[[Peer, bool], None]

    def _start_sniffing(self, sock: socket.socket, addr: str) -> None:
        sock.setblocking(False)
        wire: Wire = sock if self.tls_context is None else TlsSocket(sock, self.tls_context)
        sniffing = Sniffing(wire, addr)
        self._sniffing[wire] = sniffing
        self.selector.register(wire, selectors.EVENT_READ, sniffing)
        self._opening.watch(wire, time.monotonic())

    def _sniff(self, s: Sniffing, events: int) -> None:
        """Read a new connection's first bytes and route it: AMQP, AMQP over WebSockets, or HTTP."""
        try:
            data = s.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            self._sniff_flush(s)  # the TLS handshake is under way
            return
        except ssl.SSLError as exc:
            self._forget_sniffing(s, close=True, why=f"TLS handshake failed ({exc.reason or type(exc).__name__})")
            return
        except OSError:
            data = b""
        if not data:
            self._forget_sniffing(s, close=True)
            return
        s.buf += data
        kind = classify(s.buf)
        if kind == MORE:
            return
        if kind == AMQP:
            self._forget_sniffing(s, close=False)
            peer = self._add_peer(s.sock, s.addr)
            self._push(peer, s.buf)
            return
        try:
            head = parse_head(s.buf)
        except ValueError as exc:
            self._forget_sniffing(s, close=True, why=str(exc))
            return
        if head is None:
            return  # the rest of the request head is on its way
        _, path, headers, length = head
        self._forget_sniffing(s, close=False)
        if is_upgrade(path, headers):
            self._upgrade(s, length)
            return
        if self.http is None:
            self._refuse_http(s.sock, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        s.sock.setblocking(True)
        self.http(s.sock, s.buf)

    def _sniff_flush(self, s: Sniffing) -> None:
        """Handshake bytes the socket did not take go out when it is writable."""
        if s.tls is None:
            return
        try:
            want = not s.tls.flush()
        except OSError:
            self._forget_sniffing(s, close=True)
            return
        if want != s.want_write:
            s.want_write = want
            self.selector.modify(s.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0), s)

    def _upgrade(self, s: Sniffing, length: int) -> None:
        """AMQP over WebSockets: answer the upgrade (its head is s.buf[:length]), then serve the peer."""
        try:
            # Imported on the first upgrade: plain AMQP never pays for wsproto and h11, and an
            # environment without them (made before they became dependencies) still serves AMQP.
            from .websocket import WebSocket
        except ImportError as exc:
            log.error(
                "AMQP over WebSockets refused: %s (wsproto is a dependency of sbnotebook: pip install wsproto)", exc
            )
            self._refuse_http(
                s.sock, b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            return
        ws = WebSocket()
        if not ws.handshake(s.buf[:length]):
            self._refuse_http(s.sock, bytes(ws.out))
            return
        peer = self._add_peer(s.sock, s.addr)
        peer.ws = ws
        self._push(peer, s.buf[length:])
        self._want_write(peer, True)

    def _forget_sniffing(self, s: Sniffing, *, close: bool, why: str = "") -> None:
        self._sniffing.pop(s.sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(s.sock)
        if close:
            if why:
                log.info("closed %s: %s", s.addr, why)
            s.sock.close()

    @staticmethod
    def _refuse_http(sock: Wire, reply: bytes) -> None:
        with contextlib.suppress(OSError):
            sock.setblocking(True)
            sock.settimeout(2)
            sock.sendall(reply)
        sock.close()
