"""The live connections of the process: one per connection settings, found by ``connect()`` and ``live()``.

Every core function takes ``connection=`` as a string, settings or a live connection
(``ConnectionLike``); ``live()`` turns it into the :class:`~sbnotebook.core.connections.live.LiveConnection`
for those settings, made on first use, so calls with the same settings share one. ``connect()``
does the same and, the first time, checks the namespace and warms links in the background. At most
``MAX_LIVE_CONNECTIONS`` are kept (the least recently used beyond that is closed), and all are
closed at interpreter exit by a handler registered with the first one, not at import: exit
handlers run last registered first, so the connections close before an emulator started before
them stops (docs/core.md, "The life of a link").
"""

from __future__ import annotations

import atexit
import threading
from collections import OrderedDict
from typing import Any

from ..errors import ConfigurationError
from ..renames import renamed
from ..sdk.messages import claim_implicit_tracing, trace_kit_clients
from .connection import Connection, resolve
from .live import LiveConnection

MAX_LIVE_CONNECTIONS = 16  # per process; the least recently used beyond this is closed


class _Registry:
    """One live connection per connection settings per process (least recently used closed first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: OrderedDict[tuple[str, str, str, int, bool], LiveConnection] = OrderedDict()
        self._closes_at_exit = False

    def get(self, settings: Connection) -> LiveConnection:
        key = (
            settings.kind,
            settings.fully_qualified_namespace,
            settings.connection_string or "",
            id(settings.credential),
            settings.websockets,  # over WebSockets or not: two connections (another SDK transport)
        )
        evicted: list[LiveConnection] = []
        with self._lock:
            live = self._live.get(key)
            if live is None:
                claim_implicit_tracing()  # before the first client: an old azure-core's own pick (sdk/messages.py)
                live = self._live[key] = LiveConnection(settings)
                if not self._closes_at_exit:
                    # Registered with the first connection, not at import: exit handlers run last
                    # registered first, so connections close before an emulator started before them
                    # stops (stopped first, it cut calls still in flight: "Task exception was never
                    # retrieved" at exit, from connect()'s background warm-up).
                    atexit.register(self.close_all)
                    self._closes_at_exit = True
            self._live.move_to_end(key)
            while len(self._live) > MAX_LIVE_CONNECTIONS:
                evicted.append(self._live.popitem(last=False)[1])
        for old in evicted:
            old.close()
        return live

    def forget(self, live: LiveConnection) -> None:
        """Close ``live`` and take it out: the next get for its settings makes a new one."""
        with self._lock:
            for key in [k for k, v in self._live.items() if v is live]:
                del self._live[key]
        live.close()

    def close_all(self) -> None:
        with self._lock:
            lives, self._live = list(self._live.values()), OrderedDict()
        for live in lives:
            live.close()


registry = _Registry()
ConnectionLike = str | Connection | LiveConnection | None
"""What every ``connection=`` takes: a connection string, ``Connection`` settings, a live connection,
or None (the documented resolution order)."""


@renamed(namespace="fully_qualified_namespace")
def connect(
    connection: str | Connection | None = None,
    *,
    fully_qualified_namespace: str | None = None,
    credential: Any = None,
    websockets: bool = False,
    warm: bool = True,
    trace: bool | None = None,
) -> LiveConnection:
    """The live connection for these settings (resolved in the documented order: argument,
    ``SERVICEBUS_CONNECTION_STRING``, ``SERVICEBUS_FULLY_QUALIFIED_NAMESPACE``, embedded emulator).

    ``fully_qualified_namespace`` is ``FQDN`` or ``FQDN:PORT`` (a port is dialled as given, never
    replaced by 5671); ``credential`` (with ``fully_qualified_namespace``) is an azure-core token
    credential, sync or async, or a credential reference (``"callable:package.module:function"``,
    ``"service-credential:NAME"``: see core/connections/credentials.py); without it
    ``DefaultAzureCredential`` signs in. ``websockets`` dials AMQP
    over WebSockets (443, or the namespace's own port) where 5671 is blocked (core/sdk/websockets.py).

    With ``warm`` (the default) the first connect checks that the namespace is reachable and the
    key or credential accepted (``LiveConnection.check``: about 4 round trips), then returns while
    receivers open on up to ``WARM_LIMIT`` listed entities in the background, so a first peek on
    them costs one round trip.

    ``trace=True`` turns the azure-servicebus SDK's own OpenTelemetry tracing on for this connection's
    clients (not the process's: ``trace_kit_clients`` in core/sdk/messages.py), so its spans join the
    kit's in one trace; it needs the ``tracing`` extra (``ConfigurationError`` without, saying how to install it).
    ``trace=False`` turns it off again; None leaves it as it is. The kit's own spans (core/tracing.py)
    need no switch."""
    settings = resolve(
        connection, fully_qualified_namespace=fully_qualified_namespace, credential=credential, websockets=websockets
    )
    conn = registry.get(settings)
    if trace:
        trace_kit_clients()
    if trace is not None:
        conn.traced = trace
    if warm and not conn.warmed:
        try:
            conn.check()
        except ConfigurationError:
            # Refused or no token: the next connect starts afresh (DefaultAzureCredential reads the
            # environment again), so fixing AZURE_TENANT_ID in the kernel needs no restart.
            registry.forget(conn)
            raise
        conn.warm_in_background()
    return conn


def live(connection: ConnectionLike) -> LiveConnection:
    """Whatever a caller passed as ``connection=``, as a live connection."""
    if isinstance(connection, LiveConnection):
        return connection
    return registry.get(resolve(connection))


def close_all() -> None:
    """Close every live connection of this process (kernel shutdown does this too)."""
    registry.close_all()
