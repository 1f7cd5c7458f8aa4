"""Service Bus's limits on whole AMQP connections, for ``amqp.BrokerHandler``.

- **The namespace's connection cap**: the loop counts AMQP connections (``net/limits.py``); one over
  the cap gets its open answered, then closed at once with ``amqp:resource-limit-exceeded`` and the
  words Service Bus uses for it ("ConnectionsQuotaExceeded for namespace ..."). The SDK raises
  ``ServiceBusQuotaExceededError`` and does not retry it.
- **LinkTracker's idle deadlines** (Microsoft's "AMQP errors in Azure Service Bus"): a connection that
  opens no link within ``Deadlines.first_link`` (1 minute there), or has had none for
  ``Deadlines.no_links`` since its last one closed (5 minutes), is closed with
  ``amqp:connection:forced`` and Service Bus's words ("The connection was inactive for more than
  the allowed 60000 milliseconds and is closed by container 'LinkTracker'."). The SDK opens a new
  connection on its next operation.

A link here is any but the ``$cbs`` links a client only authenticates on: an entity's sender or
receiver, its ``$management`` link, a session receiver waiting for a session.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from proton import Link

from ..broker.timers import Timers
from ..errors import ConnectionForced, ConnectionsQuotaExceeded
from ..net.limits import Deadlines
from .terms import CBS, ConnectionState, error_condition, normalise_address

IDLE = "idle"
CONTAINER = "sbnotebook-emulator"


def is_cbs(link: Link) -> bool:
    terminus = link.remote_source if link.is_sender else link.remote_target
    return normalise_address(terminus.address).lower() == CBS


def in_use(links: Iterable[Link]) -> bool:
    """Whether a connection holds a link other than ``$cbs``."""
    return any(not is_cbs(link) for link in links)


class ConnectionLimits:
    def __init__(self, deadlines: Deadlines, namespace: str) -> None:
        self.deadlines = deadlines
        self.namespace = namespace
        self._timers = Timers()  # keys: weak references to ConnectionState

    def refused(self, connection: Any, loop: Any) -> bool:
        """Refuse ``connection`` (its open just came) if the loop counted it over the cap."""
        if loop is None or loop.admitted(connection):
            return False
        limit = loop.cap.limit
        exc = ConnectionsQuotaExceeded(
            f"ConnectionsQuotaExceeded for namespace {self.namespace}. The namespace allows {limit} "
            "concurrent AMQP connections (sbnotebook emulator: --max-connections); close the clients "
            "you no longer use."
        )
        connection.container = CONTAINER
        connection.open()  # AMQP answers an open before it closes
        connection.condition = error_condition(exc)
        connection.close()
        loop.closing(connection, f"refused: over the connection cap of {limit} (--max-connections)", logging.WARNING)
        return True

    def opened(self, state: ConnectionState) -> None:
        self._idle_from(state, self.deadlines.first_link)

    def link_closed(self, state: ConnectionState) -> None:
        """After a link's close: the no-links countdown starts when none is left."""
        if state.idle_until is None and not in_use(state.links):
            self._idle_from(state, self.deadlines.no_links)

    def _idle_from(self, state: ConnectionState, seconds: float) -> None:
        state.idle_after = seconds
        state.idle_until = time.monotonic() + seconds
        self._timers.add(state.idle_until, IDLE, weakref.ref(state))

    def due(self) -> Iterator[ConnectionState]:
        """Connections idle past their deadline now, still without links."""
        now = time.monotonic()
        for _, _, ref in self._timers.due(now):
            state = ref()
            if state is None or state.idle_until is None or state.idle_until > now:
                continue  # gone, busy again, or its countdown restarted later
            if in_use(state.links):
                state.idle_until = None
                continue
            yield state

    def close_idle(self, state: ConnectionState, loop: Any) -> None:
        seconds = state.idle_after
        state.idle_until = None
        exc = ConnectionForced(
            f"The connection was inactive for more than the allowed {round(seconds * 1000)} milliseconds "
            "and is closed by container 'LinkTracker'."
        )
        connection = state.connection
        connection.condition = error_condition(exc)
        connection.close()
        if loop is not None:
            loop.closing(connection, f"no link for {seconds:g} s (Service Bus's idle rule)")
