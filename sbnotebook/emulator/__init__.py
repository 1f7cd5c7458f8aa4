"""An embedded Azure Service Bus-compatible broker.

The official ``azure-servicebus`` SDK connects to it with
``UseDevelopmentEmulator=true`` exactly as it connects to Azure. This package
imports nothing from the rest of sbnotebook.
"""

from .broker import Broker
from .clock import ManualClock, SystemClock
from .sas import DEFAULT_KEY, DEFAULT_KEY_NAME
from .server import Emulator, connection_string
from .topology import DEFAULT_TOPOLOGY, Topology, TopologyError, default_topology

__all__ = [
    "DEFAULT_KEY",
    "DEFAULT_KEY_NAME",
    "DEFAULT_TOPOLOGY",
    "Broker",
    "Emulator",
    "ManualClock",
    "SystemClock",
    "Topology",
    "TopologyError",
    "connection_string",
    "default_topology",
]
