"""Links attached and detached, for ``amqp.BrokerHandler``: a receiver on an entity, or on a session
(locked when one is free, refused when none is within the link's timeout), a sender, the ``$cbs``
and ``$management`` links; a refusal made as Service Bus makes one (an attach with null termini,
then a detach with the error); and the links of a deleted entity detached. A part of
``amqp.BrokerHandler``, which holds the state declared here."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from proton import Endpoint, Link, Terminus, ulong

from ..broker.broker import Broker
from ..broker.entities import Entity, Subscription
from ..broker.faults import EntityFaults
from ..broker.status import check_can_receive, check_can_send
from ..broker.store import MessageStore
from ..errors import MORE, BrokerError, EntityNotFound, LinkDetachForced, OperationTimeout
from ..security.sas import LISTEN, SEND
from .management import ManagementHandler
from .terms import (
    CBS,
    LOCKED_UNTIL_UTC,
    MANAGEMENT_SUFFIX,
    MAX_BATCH_SIZE,
    SENDER_CREDIT,
    ConnectionState,
    OutLink,
    WaitingAttach,
    dotnet_ticks,
    error_condition,
    link_timeout,
    normalise_address,
    session_filter,
    set_session_filter,
)


class Attaches:
    """Attaching and detaching links for ``amqp.BrokerHandler`` (its state, declared here)."""

    broker: Broker
    loop: Any
    _conns: dict[Any, ConnectionState]
    _out: dict[Link, OutLink]
    _by_store: dict[MessageStore, set[OutLink]]
    _management: dict[Link, ManagementHandler]
    _targets: dict[Link, str]
    _entity_of: dict[Link, Entity | Subscription]
    _waiting: list[WaitingAttach]

    if TYPE_CHECKING:  # the handler's other parts: control.py, deliver.py

        def _authorize(self, conn: ConnectionState, address: str, right: str | None = None) -> None: ...

        def _faults(self, path: str) -> EntityFaults | None: ...

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
        self.broker.reject_forwarding(source)
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
