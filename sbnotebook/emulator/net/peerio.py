"""The event loop's peers and their bytes: a connection's state (proton transport, WebSocket
framing, transfer order, replies held back by simulated latency) and moving bytes between its
socket and proton (``PeerIO``, a part of ``loop.EventLoop``)."""

from __future__ import annotations

import selectors
import socket
import time
from collections import deque
from typing import TYPE_CHECKING

from proton import Collector, Connection, Transport

from .sequencing import TransferOrder
from .tlsio import TlsSocket

if TYPE_CHECKING:
    from .websocket import WebSocket  # imported by the loop on the first upgrade


# What the loop reads and writes: a socket, or one whose TLS it ends in memory (tlsio.py).
Wire = socket.socket | TlsSocket


class Sniffing:
    """A new connection whose protocol (AMQP, WebSocket or HTTP) is not known yet."""

    __slots__ = ("addr", "buf", "sock", "tls", "want_write")

    def __init__(self, sock: Wire, addr: str) -> None:
        self.sock = sock
        self.addr = addr  # host:port, for the log
        self.tls = sock if isinstance(sock, TlsSocket) else None
        self.buf = b""
        self.want_write = False  # TLS handshake bytes wait for the socket


class Peer:
    __slots__ = (
        "aborted",
        "addr",
        "backlog",
        "closing",
        "connection",
        "counted",
        "delay",
        "order",
        "outbox",
        "sock",
        "tls",
        "transport",
        "want_write",
        "ws",
        "ws_out",
    )

    def __init__(self, sock: Wire, max_frame_size: int, addr: str, counted: bool, collector: Collector) -> None:
        self.sock = sock
        self.addr = addr
        self.tls = sock if isinstance(sock, TlsSocket) else None
        self.counted = counted  # within the connection cap (else refused at its open)
        self.closing = False  # the emulator closed it (logged once); dropped if the peer does not answer
        self.connection = Connection()
        self.connection.collect(collector)  # the loop's one collector: its events name their connection
        self.transport = Transport(Transport.SERVER)
        self.transport.max_frame_size = max_frame_size
        sasl = self.transport.sasl()
        sasl.allowed_mechs("ANONYMOUS")
        self.transport.bind(self.connection)
        self.want_write = False
        self.delay = 0.0  # extra seconds on every reply (a slow entity)
        self.outbox: deque[tuple[float, bytes]] = deque()  # replies held back by simulated latency
        self.aborted = False
        self.ws: WebSocket | None = None  # set for AMQP over WebSockets
        self.ws_out = bytearray()  # framed bytes not yet sent (WebSocket peers only)
        self.order = TransferOrder(max_frame_size)  # client transfers back in delivery-id order
        self.backlog = b""  # input proton had no room for yet


class PeerIO:
    """Input into proton and output to the socket, for ``loop.EventLoop`` (its state, declared here)."""

    latency: float
    selector: selectors.BaseSelector
    _peers: dict[Wire, Peer]
    _delayed: set[Peer]  # peers with replies held back by latency

    def _push(self, peer: Peer, data: bytes) -> None:
        transport = peer.transport
        ws = peer.ws
        if ws is not None:
            data = ws.feed(data)
            if ws.out:  # the 101, pongs and the closing frame go out as they are
                peer.ws_out += ws.out
                ws.out.clear()
                self._want_write(peer, True)
        data = peer.order.feed(data)
        self._feed_proton(peer, data)
        if ws is not None and ws.closed:
            transport.close_tail()

    @staticmethod
    def _feed_proton(peer: Peer, data: bytes) -> None:
        transport = peer.transport
        if peer.backlog:
            data = peer.backlog + data
            peer.backlog = b""
        try:
            # Held transfers or a completed WebSocket message can be more than proton takes at
            # once; it consumes as it goes, so feed it in capacity-sized parts.
            while data:
                capacity = transport.capacity()
                if capacity <= 0:
                    if capacity == 0:
                        peer.backlog = data
                    break
                if len(data) <= capacity:
                    transport.push(data)
                    break
                transport.push(data[:capacity])
                data = data[capacity:]
        except Exception:  # malformed input: proton closes the transport with an error
            transport.close_tail()

    def _write(self, peer: Peer) -> None:
        if peer.tls is not None and peer.tls.unsent:
            try:
                peer.tls.flush()  # ciphertext of earlier writes first
            except OSError:
                self._lost(peer)
                return
        if peer.ws is not None:
            self._write_ws(peer)
            return
        transport = peer.transport
        delay = self.latency + peer.delay
        if delay > 0 or peer.outbox:
            pending = transport.pending()
            if pending > 0:
                peer.outbox.append((time.monotonic() + delay, transport.peek(pending) or b""))
                transport.pop(pending)
            self._send_due(peer)
            return
        while (pending := transport.pending()) > 0:
            sent = self._send(peer, transport.peek(pending) or b"")
            if not sent:
                break
            transport.pop(sent)
            if sent < pending:
                break
        self._want_write(peer, transport.pending() > 0)

    def _write_ws(self, peer: Peer) -> None:
        """WebSocket peers: proton's output goes out in binary messages, after any control replies."""
        transport = peer.transport
        pending = transport.pending()
        if pending > 0:
            assert peer.ws is not None
            framed = peer.ws.wrap(transport.peek(pending) or b"")
            transport.pop(pending)
            delay = self.latency + peer.delay
            if delay > 0 or peer.outbox:
                peer.outbox.append((time.monotonic() + delay, framed))
            else:
                peer.ws_out += framed
        if peer.outbox:
            now = time.monotonic()
            while peer.outbox and peer.outbox[0][0] <= now:
                peer.ws_out += peer.outbox.popleft()[1]
        out = peer.ws_out
        while out:
            sent = self._send(peer, out)
            if sent is None:
                out.clear()
            if not sent:
                break
            del out[:sent]
        self._want_write(peer, bool(out))

    def _send_due(self, peer: Peer) -> None:
        now = time.monotonic()
        outbox = peer.outbox
        while outbox and outbox[0][0] <= now:
            due, data = outbox[0]
            sent = self._send(peer, data)
            if sent is None:
                return
            if sent < len(data):
                outbox[0] = (due, data[sent:])
                break
            outbox.popleft()
        self._want_write(peer, bool(outbox) and outbox[0][0] <= now)

    def _send(self, peer: Peer, data: bytes | bytearray) -> int | None:
        """The bytes of ``data`` the socket took now (0: it is full); None when the peer is gone: its
        transport is closed both ways (proton then reports the connection lost) and its outbox dropped."""
        try:
            return peer.sock.send(data)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError:
            self._lost(peer)
            return None

    @staticmethod
    def _lost(peer: Peer) -> None:
        peer.outbox.clear()
        peer.transport.close_head()
        peer.transport.close_tail()

    def _want_write(self, peer: Peer, want: bool) -> None:
        if peer.tls is not None and peer.tls.unsent:
            want = True
        if want != peer.want_write:
            peer.want_write = want
            mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0)
            self.selector.modify(peer.sock, mask, peer)

    def _next_outbox_due(self) -> float:
        """When the first reply held back by latency is due (peers with none leave ``_delayed``). A
        peer whose socket is full is left to the selector, which says when it can take more: counting
        its due reply here would make the loop spin until then."""
        delayed = self._delayed
        for peer in [p for p in delayed if not p.outbox]:
            delayed.discard(peer)
        return min((p.outbox[0][0] for p in delayed if not p.want_write), default=float("inf"))
