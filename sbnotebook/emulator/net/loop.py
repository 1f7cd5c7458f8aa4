"""A lean network loop around proton's AMQP engine.

proton's Python reactor raises about a dozen Python-level events per message
(selectables, quiesce, IO bookkeeping) before the handler sees one. This loop
drives the engine directly: bytes in -> ``Transport.push``, engine events ->
handler, ``Transport.peek``/``pop`` -> bytes out. The handler sees only engine
events (connection, session, link, delivery, transport). ``frontdoor.py`` routes a new
connection (after its TLS handshake, ``tlsio.py``: TLS too is ended on this thread), ``peerio.py``
holds a connection's state and moves its bytes between the socket and proton, ``limits.py`` has
the connection cap and the deadlines this loop enforces.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import queue
import selectors
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

from cproton import (
    isnull,
    pn_collector_peek,
    pn_collector_pop,
    pn_event_connection,
    pn_event_delivery,
    pn_event_type,
)
from proton import Collector, Delivery, Endpoint, Event, EventType

from .frontdoor import READ_SIZE, FrontDoor, HttpHandoff
from .limits import CLOSE_GRACE, MAX_CONNECTIONS, Cap, Countdown, Deadlines
from .peerio import Peer, PeerIO, Sniffing, Wire

log = logging.getLogger("sbnotebook.emulator")

ACCEPT_PAUSE = 0.25  # seconds without accepting once the process is out of file descriptors
FD_WARNING_EVERY = 10.0  # seconds: running out of file descriptors is said once per episode, not per retry
TRANSPORT_TICK = 1.0  # seconds between two ticks of one connection's proton timers


def _address(addr: Any) -> str:
    host, port = addr[0], addr[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


class EventLoop(FrontDoor, PeerIO):
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
        tls: ssl.SSLContext | None = None,
        max_connections: int = MAX_CONNECTIONS,
        deadlines: Deadlines | None = None,
    ) -> None:
        self.handler = handler
        self.http = http
        self.tls_context = tls  # TLS ended on this thread: nothing on a TLS port is read in the clear
        self.cap = Cap(max_connections)
        self.deadlines = deadlines or Deadlines()
        self._opening = Countdown(self.deadlines.handshake)
        self._closing = Countdown(CLOSE_GRACE)  # peers the emulator closed, until they answer
        self._accept_again = 0.0  # when accepting resumes after running out of file descriptors
        self._fd_warned = -FD_WARNING_EVERY
        self._sniffing: dict[Wire, Sniffing] = {}
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
        self._peers: dict[Wire, Peer] = {}
        # One collector for every connection: an event names its connection, so the connections that
        # changed (input, or work the handler made on them) are known without looking at the others.
        self._collector = Collector()
        self._by_impl: dict[Any, Peer] = {}  # proton's connection handle -> its peer
        self._dirty: set[Peer] = set()  # to write, and to drop if closed, after this pass's events
        self._held: set[Peer] = set()  # transfers held for order, or input proton had no room for
        self._delayed: set[Peer] = set()
        self._ticking: list[Peer] = []  # this second's round of transport ticks, a slice each tick
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
                for key, events in self.selector.select(timeout):
                    data = key.data
                    if type(data) is Peer:
                        self._on_socket(data, events)
                    elif data is None:
                        self._accept()
                    elif data == "wake":
                        self._drain_wake()
                    else:
                        self._sniff(data, events)
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
                sock, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    self._pause_accepting()
                else:
                    log.exception("accept failed")
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if len(self._sniffing) >= self.cap.limit:  # a flood of connections that never say anything
                log.warning("closed %s: %d connections are already opening", _address(addr), len(self._sniffing))
                sock.close()
                continue
            self._start_sniffing(sock, _address(addr))

    def _pause_accepting(self) -> None:
        """Out of file descriptors: the listener would wake the loop at once, forever; rest it a moment."""
        now = time.monotonic()
        if now - self._fd_warned >= FD_WARNING_EVERY:
            self._fd_warned = now
            log.warning(
                "out of file descriptors with %d connections (raise `ulimit -n`, or lower --max-connections): "
                "new connections wait in the listen backlog",
                len(self._peers) + len(self._sniffing),
            )
        self.selector.unregister(self.listener)
        self._accept_again = now + ACCEPT_PAUSE

    def _add_peer(self, sock: Wire, addr: str) -> Peer:
        peer = Peer(sock, self.max_frame_size, addr, self.cap.admit(), self._collector)
        self._peers[sock] = peer
        self._by_connection[peer.connection] = peer
        self._by_impl[peer.connection._impl] = peer
        self.selector.register(sock, selectors.EVENT_READ, peer)
        self._dirty.add(peer)
        return peer

    def _on_socket(self, peer: Peer, events: int) -> None:
        if events & selectors.EVENT_READ:
            self._read(peer)
            if peer.order.holding or peer.backlog:
                self._held.add(peer)
        if events & selectors.EVENT_WRITE:
            self._flush(peer)
        self._dirty.add(peer)

    def _flush(self, peer: Peer) -> None:
        """Write what proton holds for ``peer``; a reply held back by latency is written when due."""
        self._write(peer)
        if peer.outbox:
            self._delayed.add(peer)

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
            self._flush(peer)

    def abort(self, connection: Any) -> None:
        """Drop a connection as a network failure would: no AMQP close, the socket just goes."""
        peer = self._by_connection.get(connection)
        if peer is not None:
            peer.aborted = True
            self._dirty.add(peer)

    def admitted(self, connection: Any) -> bool:
        """Whether ``connection`` is within the connection cap (else the handler refuses its open)."""
        peer = self._by_connection.get(connection)
        return peer is None or peer.counted

    def closing(self, connection: Any, why: str, level: int = logging.INFO) -> None:
        """The handler closed ``connection`` with an error: say so once, with the peer's address, and
        drop the socket if the peer has not answered the close within CLOSE_GRACE seconds."""
        peer = self._by_connection.get(connection)
        if peer is None or peer.closing:
            return
        peer.closing = True
        log.log(level, "closed %s: %s", peer.addr, why)
        self._closing.watch(peer.sock, time.monotonic())

    def _process_all(self) -> None:
        # Handling one connection's events can create work on another (a send feeds a receiver):
        # drain the collector until quiet, then write each connection that changed. Replies held
        # back by latency are looked at once a pass (one the socket cannot take yet stays due).
        if self._delayed and self._next_outbox_due() <= time.monotonic():
            self._dirty.update(self._delayed)
        while True:
            while self._drain_events():
                pass
            if not self._dirty:
                return
            dirty, self._dirty = self._dirty, set()
            for peer in dirty:
                if self._peers.get(peer.sock) is not peer:
                    continue  # dropped already
                if peer.aborted:
                    self._discard(peer)
                    continue
                self._flush(peer)
                if peer.transport.closed and not peer.outbox and not peer.ws_out:
                    self._discard(peer)

    def _drain_events(self) -> bool:
        collector = self._collector._impl
        handled = self._handled
        impl = pn_collector_peek(collector)
        if isnull(impl):
            return False
        fast = self._on_delivery
        raw_fast = self._on_delivery_raw
        by_impl, dirty = self._by_impl, self._dirty
        while not isnull(impl):
            peer = by_impl.get(pn_event_connection(impl))
            if peer is not None:
                dirty.add(peer)
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
        self._expire(mono)
        for peer in list(self._held):  # transfers held for order are given on after MAX_WAIT
            self._feed_proton(peer, peer.order.overdue(mono))
            self._dirty.add(peer)
            if not (peer.order.holding or peer.backlog):
                self._held.discard(peer)
        self._tick_transports(now)
        tick = getattr(self.handler, "on_tick", None)
        if tick is not None:
            try:
                tick()
            except Exception:
                log.exception("timer tick failed")

    def _tick_transports(self, now: float) -> None:
        """proton's timers (heartbeats for a peer's idle-time-out): every connection once a second,
        a slice per tick, so that thousands of idle connections cost little."""
        if not self._ticking:
            self._ticking = list(self._peers.values())
        share = max(1, round(len(self._peers) * self.tick_interval / TRANSPORT_TICK))
        for peer in self._ticking[-share:]:
            if self._peers.get(peer.sock) is peer:
                try:
                    peer.transport.tick(now)
                except Exception:
                    peer.transport.close_tail()
                self._dirty.add(peer)
        del self._ticking[-share:]

    def _expire(self, now: float) -> None:
        """Close the peers past their deadlines (each logged once, with why); accept again after a pause."""
        if self._accept_again and now >= self._accept_again:
            self._accept_again = 0.0
            self.selector.register(self.listener, selectors.EVENT_READ, None)
        limit = f"within {self.deadlines.handshake:g} s"
        for sock in self._opening.due(now):
            s = self._sniffing.get(sock)
            if s is not None:
                if s.tls is not None and not s.tls.handshaken:
                    why = f"did not complete the TLS handshake {limit}"
                else:
                    why = f"sent {len(s.buf)} bytes, not a whole protocol header or HTTP request head, {limit}"
                self._forget_sniffing(s, close=True, why=why)
                continue
            peer = self._peers.get(sock)
            if peer is not None and not peer.closing and peer.connection.state & Endpoint.REMOTE_UNINIT:
                log.info("closed %s: did not complete SASL and open its AMQP connection %s", peer.addr, limit)
                self._discard(peer)
        for sock in self._closing.due(now):
            peer = self._peers.get(sock)
            if peer is not None:  # it never answered the close
                self._discard(peer)

    def _discard(self, peer: Peer) -> None:
        if peer.counted:
            peer.counted = False
            self.cap.release()
        self._drain_events()
        gone = getattr(self.handler, "on_peer_closed", None)
        if gone is not None:
            gone(peer.connection)
        self._peers.pop(peer.sock, None)
        self._by_connection.pop(peer.connection, None)
        self._by_impl.pop(peer.connection._impl, None)
        self._held.discard(peer)
        self._delayed.discard(peer)
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
        """Every connection held: AMQP ones (within the cap or being refused) and those still opening."""
        return len(self._peers) + len(self._sniffing)

    @property
    def amqp_connections(self) -> int:
        """AMQP connections counted against the cap (plain, TLS and WebSockets)."""
        return self.cap.open

    def status(self) -> dict[str, int]:
        """Connections open, the cap, and connections still opening (read from any thread)."""
        opening = len(self._sniffing) + len(self._peers) - self.cap.open
        return {"connections": self.cap.open, "max_connections": self.cap.limit, "opening": opening}
