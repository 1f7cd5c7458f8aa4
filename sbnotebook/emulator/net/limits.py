"""The port's limits: a connection cap like Azure's, and deadlines for peers that stall.

Service Bus (Standard tier) allows 5,000 concurrent AMQP connections per namespace; further ones are
refused and the calling code gets an exception (Microsoft's "Service Bus quotas" page). The emulator
counts AMQP connections (plain, TLS, WebSockets) from their protocol header on and refuses the one
over the cap at its open (``amqp/connlimits.py``). Administration API requests do not count, as
"REST operations don't count toward concurrent TCP connections" there.

``Deadlines``: how long a peer may take before it is closed. ``handshake`` bounds everything before
the AMQP open (TCP to the first bytes, the TLS handshake, the protocol header, SASL, a WebSocket
upgrade's request head); ``first_link`` and ``no_links`` are Service Bus's idle deadlines for open
connections (Microsoft's "AMQP errors in Azure Service Bus": a connection that creates no link
within 1 minute, or whose links all closed 5 minutes ago, is closed by its 'LinkTracker').
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MAX_CONNECTIONS = 5000
"""AMQP connections an emulator accepts at once by default (``Emulator(max_connections=)``): Service
Bus Standard's cap per namespace."""
# Seconds a connection the emulator closed has to answer the close before its socket is dropped
CLOSE_GRACE = 5.0


@dataclass(frozen=True)
class Deadlines:
    """Seconds a peer may take (defaults: 30 s to open; Service Bus's 60 s and 5 min without links)."""

    handshake: float = 30.0  # from accept to the AMQP open: TLS, protocol header, SASL
    first_link: float = 60.0  # from the open to the first link
    no_links: float = 300.0  # from the last link's close to a new one

    def __post_init__(self) -> None:
        for name in ("handshake", "first_link", "no_links"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Deadlines.{name} must be a positive number of seconds")


class Cap:
    """How many AMQP connections are open, against the most allowed."""

    __slots__ = ("limit", "open")

    def __init__(self, limit: int = MAX_CONNECTIONS) -> None:
        if limit < 1:
            raise ValueError("max_connections must be at least 1")
        self.limit = limit
        self.open = 0

    def admit(self) -> bool:
        """Count one more connection if the cap allows it."""
        if self.open >= self.limit:
            return False
        self.open += 1
        return True

    def release(self) -> None:
        self.open -= 1


class Countdown:
    """Keys that fall due a fixed number of seconds after they were watched, oldest first: with
    one length for all, the order of arrival is the order of due times (a deque, no heap). Keys are
    held weakly: a connection that is gone is not kept (with its TLS state) until its due time."""

    __slots__ = ("_due", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._due: deque[tuple[float, weakref.ref[Any]]] = deque()

    def watch(self, key: Any, now: float) -> None:
        self._due.append((now + self.seconds, weakref.ref(key)))

    def due(self, now: float) -> Iterator[Any]:
        """Pop and yield each key due at ``now`` that still exists (the caller checks whether it
        still matters)."""
        due = self._due
        while due and due[0][0] <= now:
            key = due.popleft()[1]()
            if key is not None:
                yield key

    def __len__(self) -> int:
        return len(self._due)
