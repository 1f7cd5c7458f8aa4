"""An embedded Azure Service Bus-compatible broker.

The official ``azure-servicebus`` SDK connects to it with
``UseDevelopmentEmulator=true`` exactly as it connects to Azure. This package
imports nothing from the rest of sbnotebook but ``sbnotebook.sqlrules`` (the SQL of subscription
rules, which core evaluates too).

The parts, top down (each sub-package opens with its own map; docs/emulator.md has the long form).
A part imports only from its own bullet and the bullets below it (tests/project/test_folder_order.py):

- ``cli.py`` (``sbnotebook emulator``, ``python -m sbnotebook.emulator``), ``clockcli.py`` (a running
  emulator's clock from another process) and ``userprocess.py`` (the per-user emulator process the
  notebooks share, kept on disk);
- ``server.py`` (``Emulator``, the in-process server), ``timekeeping.py`` (its clock: ``now()``,
  ``advance()`` of a manual clock), ``endpoints.py`` (its host, key, connection string, certificate);
- ``admin/``: the administration API (ATOM over HTTP);
- ``amqp/``: the AMQP face (links, ``$cbs``, ``$management``, delivery, dispositions, the codec);
- ``net/``: the port (event loop, protocol detection, TLS and WebSockets on the loop, the
  connection cap and deadlines);
- ``persistence/``: ``--data-dir`` (journal, snapshot): it implements the broker's recorder;
- ``broker/``: the broker as a state machine (entities, messages, locks, sessions, settlement,
  scheduling, subscription rules, the clock and what falls due, faults, the recorder it reports to);
- ``journey/``: each message's journey as the broker notes it (a bounded log, read by
  ``Emulator.journey``, ``/$emulator/journey`` and ``read_journey`` from another process), and a span
  per event for OpenTelemetry;
- ``topology.py``: entities and policies in Microsoft's config format;
- ``security/``: SAS, Entra ID, TLS;
- ``errors.py`` (the broker's errors, by AMQP condition), ``ports.py`` (a port to restart on),
  ``oldnames.py`` (old names of the Python API, for one release).
"""

from .broker.broker import Broker
from .broker.clock import ManualClock, SystemClock
from .endpoints import connection_string
from .journey.client import read_journey
from .journey.queries import JourneyAnswer, JourneyQueryError
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
    "JourneyAnswer",
    "JourneyQueryError",
    "ManualClock",
    "SystemClock",
    "Topology",
    "TopologyError",
    "connection_string",
    "default_topology",
    "read_journey",
]
