"""An embedded Azure Service Bus-compatible broker.

The official ``azure-servicebus`` SDK connects to it with
``UseDevelopmentEmulator=true`` exactly as it connects to Azure. This package
imports nothing from the rest of sbnotebook.

Where to change what (each sub-package opens with its own map; docs/emulator.md has the long form):

- ``broker/``: the broker as a state machine (entities, messages, locks, sessions, settlement,
  scheduling, the clock and what falls due, faults); ``rules/``: subscription filters and actions;
- ``amqp/``: the AMQP face (links, ``$cbs``, ``$management``, delivery, dispositions, the codec);
- ``net/``: the port (event loop, protocol detection, TLS and WebSockets on the loop, the
  connection cap and deadlines);
- ``admin/``: the administration API (ATOM over HTTP); ``security/``: SAS, Entra ID, TLS;
- ``persistence/``: ``--data-dir`` (journal, snapshot);
- here: ``server.py`` (``Emulator``, the in-process server), ``endpoints.py`` (its host, key,
  connection string, certificate), ``timekeeping.py`` (its clock: ``now()``, ``advance()`` of a
  manual clock), ``cli.py``, ``clockcli.py`` and ``shared.py`` (the command line and the shared
  per-user emulator), ``topology.py`` (Microsoft's config format), ``errors.py``, ``ports.py``.
"""

from .broker.broker import Broker
from .broker.clock import ManualClock, SystemClock
from .endpoints import connection_string
from .net.limits import MAX_CONNECTIONS, Deadlines
from .security.sas import DEFAULT_KEY, DEFAULT_KEY_NAME
from .server import Emulator
from .timekeeping import ClockError
from .topology import DEFAULT_TOPOLOGY, Topology, TopologyError, default_topology

__all__ = [
    "DEFAULT_KEY",
    "DEFAULT_KEY_NAME",
    "DEFAULT_TOPOLOGY",
    "MAX_CONNECTIONS",
    "Broker",
    "ClockError",
    "Deadlines",
    "Emulator",
    "ManualClock",
    "SystemClock",
    "Topology",
    "TopologyError",
    "connection_string",
    "default_topology",
]
