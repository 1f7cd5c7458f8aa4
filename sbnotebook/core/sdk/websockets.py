"""AMQP over WebSockets: what the SDK needs to reach a namespace (or the emulator) on one port.

Corporate networks and some Databricks workspaces allow only 443 out, where Service Bus also
serves AMQP inside WebSockets (``wss://NAMESPACE/$servicebus/websocket``). The kit's connections
dial that way when asked (``connect(..., websockets=True)``, ``%sb_connect --websockets``, the
Spark option ``websockets``, the setting ``websockets``): ``transport_options`` is what the kit's
async SDK client gets. The SDK's async WebSocket transport runs on aiohttp, its sync one on
websocket-client: the ``websockets`` extra installs both.

SDK 7.15 drops the connection string's port when it builds the WebSocket URL (sync clients dial
``ws://host/$servicebus/websocket`` on port 80, async ones port 443); passing the endpoint again as
``custom_endpoint_address`` keeps it, which an emulator on a port of its own needs::

    ServiceBusClient.from_connection_string(conn, **websocket_options(conn))
"""

from __future__ import annotations

import importlib.util
import urllib.parse
from typing import Any

from ...about import install
from ..connection_string import endpoint_netloc
from ..errors import ConfigurationError
from .api import TransportType


def endpoint_of(connection_string: str) -> str:
    """``sb://host:port`` from a connection string."""
    return f"sb://{endpoint_netloc(connection_string)}"


def websocket_options(connection_string: str) -> dict[str, Any]:
    """Keyword arguments for ``ServiceBusClient.from_connection_string``: AMQP over WebSockets."""
    return {
        "transport_type": TransportType.AmqpOverWebsocket,
        "custom_endpoint_address": endpoint_of(connection_string),
    }


def transport_options(namespace: str, *, tls: bool) -> dict[str, Any]:
    """Keyword arguments for the kit's async ``ServiceBusClient`` to dial ``host[:port]`` over
    WebSockets: ``wss://`` on 443 for a bare host name (Azure), the namespace's own port otherwise
    (``ws://`` for the emulator without TLS). Raises a one-line ``ConfigurationError`` naming the
    extra when aiohttp (the SDK's async WebSocket library) is missing."""
    if importlib.util.find_spec("aiohttp") is None:
        raise ConfigurationError(
            f"AMQP over WebSockets needs aiohttp (the SDK's WebSocket library): {install().pip_install('websockets')}."
        )
    options: dict[str, Any] = {"transport_type": TransportType.AmqpOverWebsocket}
    if urllib.parse.urlsplit(f"//{namespace}").port is not None:
        options["custom_endpoint_address"] = f"{'https' if tls else 'sb'}://{namespace}"
    return options
