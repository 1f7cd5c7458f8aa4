"""A lean network loop around proton's AMQP engine.

proton's Python reactor raises about a dozen Python-level events per message
(selectables, quiesce, IO bookkeeping) before the handler sees one. This loop
drives the engine directly: bytes in -> ``Transport.push``, engine events ->
handler, ``Transport.peek``/``pop`` -> bytes out. The handler sees only engine
events (connection, session, link, delivery, transport). ``peerio.py`` holds a connection's
state and moves its bytes between the socket and proton.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import selectors
import socket
import time
from collections.abc import Callable
from typing import Any

from cproton import isnull, pn_collector_peek, pn_collector_pop, pn_event_delivery, pn_event_type
from proton import Delivery, Event, EventType

from .frontdoor import AMQP, MORE, classify, is_upgrade, parse_head
from .peerio import Peer, PeerIO, Sniffing

log = logging.getLogger("sbnotebook.emulator")

READ_SIZE = 256 * 1024


# Hands a plain HTTP connection (socket, bytes already read) to the administration API.
HttpHandoff = Callable[[socket.socket, bytes], None]
# Takes a just-accepted socket whose TLS is ended elsewhere (tlsrelay.py); the plain side comes back
# through ``EventLoop.adopt``.
TlsHandoff = Callable[[socket.socket], None]


class EventLoop(PeerIO):
    def __init__(
        self,
        handler: Any,
        host: str,
        port: int,
        *,
        backlog: int = 512,
        tick: float = 0.05,
        max_frame_size: int = 256 * 1024,
        http: HttpHandoff | None = None,
        tls: TlsHandoff | None = None,
    ) -> None:
        self.handler = handler
        self.http = http
        self.tls = tls
        self._sniffing: dict[socket.socket, Sniffing] = {}
        self.tick_interval = tick
        self.max_frame_size = max_frame_size
        self.selector = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, port))
        self.listener.listen(backlog)
        self.listener.setblocking(False)
        self.port: int = self.listener.getsockname()[1]
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._peers: dict[socket.socket, Peer] = {}
        self._stopping = False
        self.latency = 0.0  # seconds added to every reply on every connection
        self._by_connection: dict[Any, Peer] = {}
        handler.loop = self
        # Only wrap events the handler has a method for: wrapping is the costly part.
        self._handled = {n for n, t in EventType.TYPES.items() if hasattr(handler, t.method)}
        self._delivery_type = Event.DELIVERY.number
        self._on_delivery = getattr(handler, "on_delivery_object", None)
        self._on_delivery_raw = getattr(handler, "on_delivery_raw", None)

    # ------------------------------------------------------- other threads

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop's thread (thread-safe)."""
        self._calls.put(fn)
        with contextlib.suppress(OSError):
            self._wake_w.send(b"!")

    def stop(self) -> None:
        self.call_soon(self._request_stop)

    def _request_stop(self) -> None:
        self._stopping = True

    # ----------------------------------------------------------------- loop

    def run(self) -> None:
        next_tick = time.monotonic() + self.tick_interval
        try:
            while not self._stopping:
                timeout = max(0.0, min(next_tick, self._next_outbox_due()) - time.monotonic())
                for key, _ in self.selector.select(timeout):
                    data = key.data
                    if type(data) is Peer:
                        self._on_socket(data, key.events)
                    elif data is None:
                        self._accept()
                    elif data == "wake":
                        self._drain_wake()
                    else:
                        self._sniff(data)
                self._process_all()
                now = time.monotonic()
                if now >= next_tick:
                    next_tick = now + self.tick_interval
                    self._tick()
                    self._process_all()
        finally:
            self._close_all()

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass
        while True:
            try:
                fn = self._calls.get_nowait()
            except queue.Empty:
                return
            try:
                fn()
            except Exception:
                log.exception("a scheduled call failed")

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                log.exception("accept failed")
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                self.tls(sock)  # nothing on a TLS port is read in the clear
                continue
            self._start_sniffing(sock)

    def adopt(self, sock: socket.socket) -> None:
        """Serve a connection accepted elsewhere (the plain side of a TLS one). Thread-safe."""
        self.call_soon(lambda: self._start_sniffing(sock))

    def _start_sniffing(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        sniffing = Sniffing(sock)
        self._sniffing[sock] = sniffing
        self.selector.register(sock, selectors.EVENT_READ, sniffing)

    def _sniff(self, s: Sniffing) -> None:
        """Read a new connection's first bytes and route it: AMQP, AMQP over WebSockets, or HTTP."""
        try:
            data = s.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
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
            peer = self._add_peer(s.sock)
            self._push(peer, s.buf)
            return
        try:
            head = parse_head(s.buf)
        except ValueError:
            self._forget_sniffing(s, close=True)
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
        peer = self._add_peer(s.sock)
        peer.ws = ws
        self._push(peer, s.buf[length:])
        self._want_write(peer, True)

    def _forget_sniffing(self, s: Sniffing, *, close: bool) -> None:
        self._sniffing.pop(s.sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(s.sock)
        if close:
            s.sock.close()

    @staticmethod
    def _refuse_http(sock: socket.socket, reply: bytes) -> None:
        with contextlib.suppress(OSError):
            sock.setblocking(True)
            sock.settimeout(2)
            sock.sendall(reply)
        sock.close()

    def _add_peer(self, sock: socket.socket) -> Peer:
        peer = Peer(sock, self.max_frame_size)
        self._peers[sock] = peer
        self._by_connection[peer.connection] = peer
        self.selector.register(sock, selectors.EVENT_READ, peer)
        return peer

    def _on_socket(self, peer: Peer, events: int) -> None:
        if events & selectors.EVENT_READ:
            self._read(peer)
        if events & selectors.EVENT_WRITE:
            self._write(peer)

    def _read(self, peer: Peer) -> None:
        transport = peer.transport
        capacity = transport.capacity()
        if capacity < 0:
            return  # tail closed; waiting for output to drain
        try:
            data = peer.sock.recv(min(capacity, READ_SIZE) or READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            transport.close_tail()
            return
        if peer.ws is None and not peer.backlog:
            data = peer.order.feed(data)
            if len(data) <= capacity:  # the common case: straight into proton
                try:
                    transport.push(data)
                except Exception:  # malformed input: proton closes the transport with an error
                    transport.close_tail()
                return
            self._feed_proton(peer, data)
            return
        self._push(peer, data)

    # ------------------------------------------------- called by the handler

    def set_delay(self, connection: Any, seconds: float) -> None:
        peer = self._by_connection.get(connection)
        if peer is not None:
            peer.delay = max(peer.delay, seconds)

    def sent_as_batch(self, connection: Any, tag: bytes) -> bool | None:
        """True if the client sent the transfer with this delivery tag as a batch (its message-format
        said so); None if not known (then the envelope's shape decides)."""
        peer = self._by_connection.get(connection)
        return True if peer is not None and peer.order.take_batch(tag) else None

    def write_now(self, connection: Any) -> None:
        """Put what the engine holds for ``connection`` on its socket (or its latency outbox) now,
        from inside a handler: a long run of deliveries starts reaching the client while it runs."""
        peer = self._by_connection.get(connection)
        # A full socket (want_write) is written when it drains: copying the backlog again per call
        # would make a long run quadratic.
        if peer is not None and not peer.aborted and not peer.want_write:
            self._write(peer)

    def abort(self, connection: Any) -> None:
        """Drop a connection as a network failure would: no AMQP close, the socket just goes."""
        peer = self._by_connection.get(connection)
        if peer is not None:
            peer.aborted = True

    def _process_all(self) -> None:
        # Handling one connection's events can create work on another (a send feeds a receiver),
        # so repeat until every collector is quiet, then flush every transport.
        busy = True
        while busy:
            busy = False
            for peer in list(self._peers.values()):
                if self._drain_events(peer):
                    busy = True
        for peer in list(self._peers.values()):
            if peer.aborted:
                self._discard(peer)
                continue
            self._write(peer)
            if peer.transport.closed and not peer.outbox and not peer.ws_out:
                self._discard(peer)

    def _drain_events(self, peer: Peer) -> bool:
        collector = peer.collector._impl
        handled = self._handled
        impl = pn_collector_peek(collector)
        if isnull(impl):
            return False
        fast = self._on_delivery
        raw_fast = self._on_delivery_raw
        while not isnull(impl):
            kind = pn_event_type(impl)
            if kind == self._delivery_type and fast is not None:
                try:
                    raw = pn_event_delivery(impl)
                    if raw_fast is None or not raw_fast(raw):
                        fast(Delivery.wrap(raw))
                except Exception:
                    log.exception("handler failed on a delivery")
            elif kind in handled:
                event = Event.wrap(impl)
                if event is not None:
                    self._dispatch(event)
            pn_collector_pop(collector)
            impl = pn_collector_peek(collector)
        return True

    def _dispatch(self, event: Event) -> None:
        try:
            event.dispatch(self.handler)
        except Exception:
            log.exception("handler failed on %s", event.type)
            conn = event.connection
            if conn is not None and conn.transport is not None:
                conn.transport.close_tail()

    def _tick(self) -> None:
        now = time.time()
        mono = time.monotonic()
        for peer in self._peers.values():
            if peer.order.holding or peer.backlog:
                self._feed_proton(peer, peer.order.overdue(mono))
            try:
                peer.transport.tick(now)
            except Exception:
                peer.transport.close_tail()
        tick = getattr(self.handler, "on_tick", None)
        if tick is not None:
            try:
                tick()
            except Exception:
                log.exception("timer tick failed")

    def _discard(self, peer: Peer) -> None:
        self._drain_events(peer)
        gone = getattr(self.handler, "on_peer_closed", None)
        if gone is not None:
            gone(peer.connection)
        self._peers.pop(peer.sock, None)
        self._by_connection.pop(peer.connection, None)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(peer.sock)
        peer.sock.close()

    def _close_all(self) -> None:
        for peer in list(self._peers.values()):
            self._discard(peer)
        for s in list(self._sniffing.values()):
            self._forget_sniffing(s, close=True)
        for sock in (self.listener, self._wake_r, self._wake_w):
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(sock)
            sock.close()
        self.selector.close()

    @property
    def connection_count(self) -> int:
        return len(self._peers) + len(self._sniffing)
