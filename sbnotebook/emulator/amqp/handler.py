"""The AMQP 1.0 face of the broker, on python-qpid-proton.

A thin mapping: attaches become Sources or targets, transfers become
``Broker.send``, credit becomes ``Broker.receive``, dispositions become
settlement. Everything runs on the event loop's thread; errors in one
connection or link are answered on that connection or link only.
Here: the proton events (connections, sessions, links, credit, deliveries). ``attach.py`` attaches
and detaches links; ``control.py`` answers the ``$cbs`` and ``$management`` links; ``deliver.py``
sends locked messages; ``terms.py`` holds the per-connection and per-link records and the Service
Bus link terms.
"""

from __future__ import annotations

import itertools
import logging
from collections import defaultdict
from typing import Any, cast

from cproton_ffi import lib
from proton import Delivery, Endpoint, Event, Handler, Link

from ..broker.broker import Broker
from ..broker.entities import Entity, Subscription
from ..broker.store import MessageStore
from ..errors import BadRequest, BrokerError, MessageSizeExceeded, ServerError
from ..net.limits import Deadlines
from ..security.entra import Issuer
from ..security.sas import KeyRing
from .attach import Attaches
from .codec import DecodeError, decode_transfer
from .connlimits import CONTAINER, ConnectionLimits, is_cbs
from .control import ControlLinks
from .deliver import Deliveries
from .management import ManagementHandler
from .settle import settle
from .terms import (
    CBS,
    MAX_BATCH_MESSAGES,
    PN_ACCEPTED,
    SENDER_CREDIT,
    SESSION_CAPACITY,
    ConnectionState,
    OutLink,
    WaitingAttach,
    error_condition,
    need,
    raw_tag,
    raw_token,
)

log = logging.getLogger("sbnotebook.emulator")


class BrokerHandler(Attaches, ControlLinks, Deliveries, Handler):
    def __init__(
        self,
        broker: Broker,
        keys: KeyRing | dict[str, str],
        issuer: Issuer | None = None,
        deadlines: Deadlines | None = None,
    ) -> None:
        super().__init__()
        self.broker = broker
        self.limits = ConnectionLimits(deadlines or Deadlines(), broker.namespace)
        self.keys = KeyRing.of(keys)
        self.issuer = issuer  # Entra ID tokens (with --tls); None: SAS tokens only
        self._conns: dict[Any, ConnectionState] = {}
        self._out: dict[Link, OutLink] = {}
        self._by_store: dict[MessageStore, set[OutLink]] = defaultdict(set)
        self._management: dict[Link, ManagementHandler] = {}
        self._targets: dict[Link, str] = {}
        self._entity_of: dict[Link, Entity | Subscription] = {}  # detached when it is deleted
        self.loop: Any = None  # set by the EventLoop: latency, slow entities, aborts
        self._waiting: list[WaitingAttach] = []
        self._plain_tags = itertools.count(1)

    # ------------------------------------------------------------ lifecycle

    def on_tick(self) -> None:
        """Called by the loop every TICK_SECONDS: fire due timers, feed waiting receivers."""
        self.broker.tick()
        self._try_sessions()
        for idle in self.limits.due():
            self.limits.close_idle(idle, self.loop)
        self.flush()

    def on_peer_closed(self, connection: Any) -> None:
        """The socket is gone: whatever the connection held is released."""
        self._drop_connection(connection)

    def on_connection_remote_open(self, event: Event) -> None:
        conn = need(event.connection, "connection")
        if self.limits.refused(conn, self.loop):
            return
        self.limits.opened(self._conn(conn))
        if conn.state & Endpoint.LOCAL_UNINIT:
            conn.container = CONTAINER
            conn.open()

    def on_session_remote_open(self, event: Event) -> None:
        ssn = need(event.session, "session")
        if ssn.connection.state & Endpoint.LOCAL_CLOSED:
            return  # a connection refused or closed by the broker takes nothing new
        if ssn.state & Endpoint.LOCAL_UNINIT:
            ssn.incoming_capacity = SESSION_CAPACITY
            ssn.open()

    def on_connection_remote_close(self, event: Event) -> None:
        conn = need(event.connection, "connection")
        self._drop_connection(conn)
        if conn.state & Endpoint.LOCAL_ACTIVE:
            conn.close()

    def on_session_remote_close(self, event: Event) -> None:
        ssn = need(event.session, "session")
        if ssn.state & Endpoint.LOCAL_ACTIVE:
            ssn.close()

    def on_transport_closed(self, event: Event) -> None:
        if event.connection is not None:
            self._drop_connection(event.connection)

    def on_transport_error(self, event: Event) -> None:
        cond = need(event.transport, "transport").condition
        log.debug("transport error: %s %s", cond.name if cond else "?", cond.description if cond else "")

    def _drop_connection(self, connection: Any) -> None:
        self._waiting = [w for w in self._waiting if w.out.link.connection != connection]
        state = self._conns.pop(connection, None)
        if state is None:
            return
        for link in list(state.links):
            self._forget_link(link)
        self.flush()

    # ------------------------------------------------ links (attach.py attaches and detaches them)

    def on_link_remote_open(self, event: Event) -> None:
        link = cast(Link, need(event.link, "link"))
        if not link.state & Endpoint.LOCAL_UNINIT or link.connection.state & Endpoint.LOCAL_CLOSED:
            return
        conn = self._conn(link.connection)
        try:
            if link.is_sender:
                self._attach_outgoing(link, conn)
            else:
                self._attach_incoming(link, conn)
        except BrokerError as exc:
            self._refuse(link, exc)
            return
        conn.links.add(link)
        if not is_cbs(link):
            conn.idle_until = None

    def on_link_remote_close(self, event: Event) -> None:
        link = cast(Link, need(event.link, "link"))
        conn = self._conns.get(link.connection)
        if conn is not None:
            conn.links.discard(link)
            self.limits.link_closed(conn)
        self._forget_link(link)
        if link.state & Endpoint.LOCAL_ACTIVE:
            link.close()
        self.flush()

    # ---------------------------------------------------------------- credit

    def on_link_flow(self, event: Event) -> None:
        out = self._out.get(cast(Link, need(event.link, "link")))
        if out is None:
            return
        self._send_replies(out)
        if out.source is not None:
            self._pump(out)

    def flush(self) -> None:
        deleted = self.broker.pop_deleted()
        if deleted:
            self._detach_deleted(deleted)
        dirty = self.broker.pop_dirty()
        if dirty and self._waiting:
            self._try_sessions()
        for store in dirty:
            for out in list(self._by_store.get(store, ())):
                if out.link.credit > 0:
                    self._pump(out)

    # ------------------------------------------------------------ deliveries

    def on_delivery(self, event: Event) -> None:
        self.on_delivery_object(need(event.delivery, "delivery"))

    def on_delivery_raw(self, impl: Any) -> bool:
        """The hottest path, at the C level: a receiver completing a peek-locked message.
        Returns False for anything else, which then takes ``on_delivery_object``."""
        if not lib.pn_link_is_sender(lib.pn_delivery_link(impl)):
            return False  # an incoming send
        if not lib.pn_delivery_updated(impl):
            return True  # nothing new from the receiver
        if lib.pn_delivery_remote_state(impl) != PN_ACCEPTED or lib.pn_delivery_settled(impl):
            return False
        token = raw_token(impl)
        if token is None:
            return False
        try:
            self.broker.complete(token)
        except BrokerError:
            return False  # lock lost: the wrapped path replies with the error
        lib.pn_delivery_update(impl, PN_ACCEPTED)
        lib.pn_delivery_settle(impl)
        return True

    def on_delivery_object(self, delivery: Delivery) -> None:
        """Deliveries that are not plain completes: incoming sends and the other outcomes."""
        link = delivery.link
        if link.is_sender:  # one of ours, sent to a receiver: its settlement arrived
            if delivery.updated:
                out = self._out.get(link)
                store = out.source.store if out is not None and out.source is not None else None
                settle(self.broker, delivery, raw_token(delivery._impl), store)
        elif delivery.readable and not delivery.partial:
            self._incoming(link, delivery)
        self.flush()

    def _incoming(self, link: Link, delivery: Delivery) -> None:
        data = link.recv(delivery.pending) or b""
        link.advance()
        if link.credit < SENDER_CREDIT // 2:
            link.flow(SENDER_CREDIT - link.credit)
        target = self._targets.get(link)
        try:
            if target == CBS:
                self._put_token(link, data)
                self._accept(delivery)
            elif link in self._management:
                self._manage(link, data)
                self._accept(delivery)
            elif target is not None:
                tag = raw_tag(delivery._impl)
                batch = None if self.loop is None else self.loop.sent_as_batch(link.connection, tag)
                self._publish(link, target, data, batch)
                self._accept(delivery)
        except BrokerError as exc:
            if not delivery.settled:
                delivery.local.condition = error_condition(exc)
                delivery.update(Delivery.REJECTED)
                delivery.settle()

    @staticmethod
    def _accept(delivery: Delivery) -> None:
        if not delivery.settled:
            delivery.update(Delivery.ACCEPTED)
            delivery.settle()

    def _publish(self, link: Link, target: str, data: bytes, batch: bool | None) -> None:
        """A transfer counts whole against the link's max-message-size, a batch's envelope and the
        ids it copies from its first message included: Service Bus's AMQP layer refuses a delivery
        whose transferred bytes exceed it (Microsoft.Azure.Amqp's ``ReceivingAmqpLink``), and the .NET
        SDK counts that envelope in a batch's size. (The Python SDK sizes a batch before copying the
        first message's ids into the envelope: its full batches can encode over the limit, and are
        refused: docs/emulator.md "A batch's size".) A batch also holds at most MAX_BATCH_MESSAGES."""
        limit = link.max_message_size or 0
        if limit and len(data) > limit:
            raise MessageSizeExceeded(
                f"The received message (size {len(data)} bytes) exceeds the limit ({limit} bytes) "
                "currently allowed on the link.",
                entity=target,
            )
        try:
            messages = decode_transfer(data, batch)
        except DecodeError as exc:
            raise BadRequest(str(exc), entity=target) from None
        if len(messages) > MAX_BATCH_MESSAGES:
            raise ServerError(entity=target)
        self.broker.send(target, messages)
