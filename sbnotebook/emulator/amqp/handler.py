"""The AMQP 1.0 face of the broker, on python-qpid-proton.

A thin mapping: attaches become Sources or targets, transfers become
``Broker.send``, credit becomes ``Broker.receive``, dispositions become
settlement. Everything runs on the event loop's thread; errors in one
connection or link are answered on that connection or link only.
``amqpcontrol.py`` answers the ``$cbs`` and ``$management`` links; ``amqpterms.py`` holds the
per-connection and per-link records and the Service Bus link terms.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import defaultdict
from typing import Any, cast

from cproton_ffi import lib
from proton import Delivery, Endpoint, Event, Handler, Link, Terminus, ulong

from ..broker.broker import Broker
from ..broker.entities import Entity, Subscription
from ..broker.status import check_can_receive, check_can_send
from ..broker.store import MessageStore
from ..errors import (
    MORE,
    BadRequest,
    BrokerError,
    EntityNotFound,
    LinkDetachForced,
    MessageSizeExceeded,
    OperationTimeout,
)
from ..net.limits import Deadlines
from ..security.entra import Issuer
from ..security.sas import LISTEN, SEND, KeyRing
from .codec import DecodeError, decode_transfer
from .connrules import CONTAINER, ConnectionRules, is_cbs
from .control import ControlLinks
from .deliver import Deliveries
from .management import ManagementHandler
from .settle import settle
from .terms import (
    CBS,
    LOCKED_UNTIL_UTC,
    MANAGEMENT_SUFFIX,
    MAX_BATCH_SIZE,
    PN_ACCEPTED,
    SENDER_CREDIT,
    SESSION_CAPACITY,
    ConnectionState,
    OutLink,
    WaitingAttach,
    dotnet_ticks,
    error_condition,
    link_timeout,
    need,
    normalise_address,
    raw_tag,
    raw_token,
    session_filter,
    set_session_filter,
)

log = logging.getLogger("sbnotebook.emulator")


class BrokerHandler(ControlLinks, Deliveries, Handler):
    def __init__(
        self,
        broker: Broker,
        keys: KeyRing | dict[str, str],
        issuer: Issuer | None = None,
        deadlines: Deadlines | None = None,
    ) -> None:
        super().__init__()
        self.broker = broker
        self.rules = ConnectionRules(deadlines or Deadlines(), broker.namespace)
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
        for idle in self.rules.due():
            self.rules.close_idle(idle, self.loop)
        self.flush()

    def on_peer_closed(self, connection: Any) -> None:
        """The socket is gone: whatever the connection held is released."""
        self._drop_connection(connection)

    def on_connection_remote_open(self, event: Event) -> None:
        conn = need(event.connection, "connection")
        if self.rules.refused(conn, self.loop):
            return
        self.rules.opened(self._conn(conn))
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

    # ----------------------------------------------------------------- links

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

    def _attach_outgoing(self, link: Link, conn: ConnectionState) -> None:
        address = normalise_address(link.remote_source.address)
        self._mirror_termini(link)
        if address.lower() == CBS:
            conn.cbs_sender = link
            self._out[link] = OutLink(link, peek_lock=False)
            link.open()
            return
        if address.lower().endswith(MANAGEMENT_SUFFIX):
            self._authorize(conn, address)
            entity = address[: -len(MANAGEMENT_SUFFIX)]
            self._entity_of[link] = self._check_entity(entity)
            self._out[link] = OutLink(link, peek_lock=False)
            link.open()
            return
        self._authorize(conn, address, LISTEN)
        source = self.broker.resolve_source(address)
        self.broker._reject_forwarding(source)
        check_can_receive(source.entity, self.broker.namespace)  # a disabled entity refuses the link
        peek_lock = link.remote_snd_settle_mode != Link.SND_SETTLED
        out = OutLink(link, source=source, peek_lock=peek_lock)
        self._apply_entity_faults(link, address)
        wants_session, session_id = session_filter(link)
        if wants_session:
            timeout = link_timeout(link)
            self._waiting.append(WaitingAttach(out, session_id, time.monotonic() + timeout))
            self._try_sessions()
            return
        if source.store.sessions is not None:
            self.broker.receive(source, 0, peek_lock=peek_lock)  # raises the not-allowed error
        self._open_receiver(out)

    def _open_receiver(self, out: OutLink) -> None:
        assert out.source is not None
        self._out[out.link] = out
        self._by_store[out.source.store].add(out)
        self._entity_of[out.link] = out.source.entity
        out.link.open()

    def _try_sessions(self) -> None:
        """Answer session attaches: lock the named or next free session, or time out."""
        if not self._waiting:
            return
        now = time.monotonic()
        still: list[WaitingAttach] = []
        for wait in self._waiting:
            out, link = wait.out, wait.out.link
            if link.state & Endpoint.REMOTE_CLOSED:
                continue
            assert out.source is not None
            try:
                session = self.broker.accept_session(out.source, wait.session_id, out)
            except BrokerError as exc:
                self._refuse(link, exc)
                continue
            if session is None:
                if now >= wait.deadline:
                    self._refuse(
                        link,
                        OperationTimeout(
                            "No session is available to accept within the timeout.", entity=out.source.store.path
                        ),
                    )
                else:
                    still.append(wait)
                continue
            out.session_id = session.id
            set_session_filter(link, session.id)
            link.properties = {LOCKED_UNTIL_UTC: dotnet_ticks(session.locked_until or 0.0)}
            conn = self._conns.get(link.connection)
            if conn is not None:
                conn.links.add(link)
            self._open_receiver(out)
        self._waiting = still

    def _attach_incoming(self, link: Link, conn: ConnectionState) -> None:
        address = normalise_address(link.remote_target.address)
        self._mirror_termini(link)
        if address.lower() == CBS:
            self._targets[link] = CBS
        elif address.lower().endswith(MANAGEMENT_SUFFIX):
            self._authorize(conn, address)
            entity = address[: -len(MANAGEMENT_SUFFIX)]
            self._entity_of[link] = self._check_entity(entity)
            self._management[link] = ManagementHandler(self.broker, entity)
            self._apply_entity_faults(link, entity)
            self._targets[link] = address
        else:
            self._authorize(conn, address, SEND)
            target = self.broker.resolve_target(address)
            check_can_send(target, self.broker.namespace)
            self._entity_of[link] = target
            link.max_message_size = target.props.max_message_size
            # SDK 7.15 sizes ServiceBusMessageBatch from this vendor property when present.
            link.properties = {MAX_BATCH_SIZE: ulong(target.props.max_message_size)}
            self._apply_entity_faults(link, address)
            self._targets[link] = address
        link.open()
        link.flow(SENDER_CREDIT)

    def _apply_entity_faults(self, link: Link, entity: str) -> None:
        faults = self._faults(entity)
        if faults is not None and faults.delay > 0 and self.loop is not None:
            self.loop.set_delay(link.connection, faults.delay)

    def _check_entity(self, entity: str) -> Entity | Subscription:
        try:
            return self.broker.resolve_source(entity).entity
        except EntityNotFound:
            return self.broker.resolve_target(entity)

    @staticmethod
    def _mirror_termini(link: Link) -> None:
        # The SDK needs non-null source and target on the attach reply.
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = link.remote_rcv_settle_mode

    def _refuse(self, link: Link, exc: BrokerError) -> None:
        # attach with null termini, then detach with the error: the SDK maps the condition.
        link.source.type = Terminus.UNSPECIFIED
        link.target.type = Terminus.UNSPECIFIED
        link.open()
        link.condition = error_condition(exc)
        link.close()

    def on_link_remote_close(self, event: Event) -> None:
        link = cast(Link, need(event.link, "link"))
        conn = self._conns.get(link.connection)
        if conn is not None:
            conn.links.discard(link)
            self.rules.link_closed(conn)
        self._forget_link(link)
        if link.state & Endpoint.LOCAL_ACTIVE:
            link.close()
        self.flush()

    def _forget_link(self, link: Link) -> None:
        out = self._out.pop(link, None)
        if out is not None:
            if out.source is not None:
                self._by_store[out.source.store].discard(out)
            self.broker.release_owner(out)  # unsettled locks: given back
        self._management.pop(link, None)
        self._targets.pop(link, None)
        self._entity_of.pop(link, None)

    # ------------------------------------------------------- deleted entities

    def _detach_deleted(self, deleted: list[Entity | Subscription]) -> None:
        """Service Bus detaches the links of a deleted entity (senders, receivers, sub-queues,
        sessions, ``$management``), so clients reattach on their next call: to the entity made
        again under that name, or to nothing (not found). Left attached, a link would read the
        deleted entity's empty stores for ever."""
        gone = set(deleted)
        for link, entity in list(self._entity_of.items()):
            if entity in gone:
                self._detach(link, self._deleted_error(link))
        waiting = [w for w in self._waiting if w.out.source is not None and w.out.source.entity in gone]
        self._waiting = [w for w in self._waiting if w not in waiting]
        for wait in waiting:  # a session receiver still waiting to attach: refused, not left to time out
            self._refuse(wait.out.link, self._deleted_error(wait.out.link))

    def _deleted_error(self, link: Link) -> BrokerError:
        terminus = link.remote_source if link.is_sender else link.remote_target
        address = normalise_address(terminus.address)
        if link in self._management or address.lower().endswith(MANAGEMENT_SUFFIX):
            # What Service Bus sent on a $management link of a deleted queue (azure-sdk-for-net#30028).
            return LinkDetachForced(
                f"The link '{link.name}' is force detached. Code: ServerError. Details: "
                "AmqpControlProtocolClient.Fault.",
                entity=address,
            )
        host = link.connection.remote_hostname
        where = f"sb://{host}/{address}" if host else address
        return EntityNotFound(f"The messaging entity '{where}' could not be found. {MORE}", entity=address)

    def _detach(self, link: Link, error: BrokerError) -> None:
        conn = self._conns.get(link.connection)
        if conn is not None:
            conn.links.discard(link)
        self._forget_link(link)  # its locks went with the entity; a session it held is released
        if link.state & Endpoint.LOCAL_ACTIVE:
            link.condition = error_condition(error)
            link.close()  # a closing detach: the client's answer is handled as any remote close

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
        self.broker.send(target, messages)
