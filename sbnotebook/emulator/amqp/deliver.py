"""Messages out: what a receiver's link credit asks for, locked at the broker and sent as
deliveries, and the fault rule that drops a connection after so many. A part of
``amqp.BrokerHandler``, which holds the state declared here."""

from __future__ import annotations

import itertools
import logging
from typing import Any

from cproton import pn_delivery, pn_link_send
from cproton_ffi import lib
from proton import Link

from ..broker.broker import Broker
from ..broker.faults import EntityFaults
from ..errors import BrokerError
from .codec import encode_stored, lock_tag
from .terms import ConnectionState, OutLink, error_condition

log = logging.getLogger("sbnotebook.emulator")

PUMP_CHUNK = 256  # messages locked and encoded between writes to the socket (Deliveries._pump)


class Deliveries:
    """Sending locked messages for ``amqp.BrokerHandler`` (its state, declared here)."""

    broker: Broker
    loop: Any
    _conns: dict[Any, ConnectionState]
    _plain_tags: itertools.count[int]

    def _faults(self, path: str) -> EntityFaults | None:
        """Fault rules are kept per queue or topic: the first segment of any entity path."""
        return self.broker.faults.get(path.split("/")[0])

    def _pump(self, out: OutLink) -> None:
        """Send what the link's credit asks for, written to the socket every PUMP_CHUNK messages.
        Service Bus streams a large credit: the first messages are on the wire while later ones are
        still being locked. Locking and encoding 10,000 before writing a byte kept a loaded process's
        receiver waiting past its wait time (it then saw nothing, and the locks it was sent lapsed)."""
        link = out.link
        assert out.source is not None
        credit = min(link.credit, self._deliveries_before_drop(link, out))
        while credit > 0:
            try:
                msgs = self.broker.receive(
                    out.source, min(credit, PUMP_CHUNK), peek_lock=out.peek_lock, owner=out, session_id=out.session_id
                )
            except BrokerError as exc:
                link.condition = error_condition(exc)
                link.close()
                return
            self._send_locked(out, msgs)
            if len(msgs) < PUMP_CHUNK:
                break
            credit -= len(msgs)
            if self.loop is not None:
                self.loop.write_now(link.connection)
        if link.drain_mode and link.credit > 0:
            link.drained()

    def _send_locked(self, out: OutLink, msgs: list[Any]) -> None:
        if not msgs:
            return
        impl = out.link._impl
        for msg in msgs:
            token = msg.lock_token
            # Peek-lock tags are the 16-byte lock token; receive-and-delete tags are 8 bytes.
            tag = lock_tag(token) if token is not None else next(self._plain_tags).to_bytes(8, "big")
            delivery = pn_delivery(impl, tag)
            pn_link_send(impl, encode_stored(msg, locked_until=msg.locked_until, lock_token=token))
            lib.pn_link_advance(impl)
            if not out.peek_lock:
                lib.pn_delivery_settle(delivery)
        self._count_deliveries(out.link, out, len(msgs))

    def _deliveries_before_drop(self, link: Link, out: OutLink) -> int:
        assert out.source is not None
        faults = self._faults(out.source.store.path)
        if faults is None or faults.drop_after <= 0:
            return link.credit
        conn = self._conns.get(link.connection)
        return faults.drop_after - (conn.deliveries if conn else 0)

    def _count_deliveries(self, link: Link, out: OutLink, count: int) -> None:
        assert out.source is not None
        faults = self._faults(out.source.store.path)
        if faults is None or faults.drop_after <= 0 or self.loop is None:
            return
        conn = self._conns.get(link.connection)
        if conn is None:
            return
        conn.deliveries += count
        if conn.deliveries >= faults.drop_after:
            log.info("fault injection: dropping a connection after %d deliveries", conn.deliveries)
            self.loop.abort(link.connection)
