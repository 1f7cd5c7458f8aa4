"""AMQP over WebSockets: what the SDK needs to reach a namespace (or the emulator) on one port.

Corporate networks and some Databricks workspaces allow only 443. SDK 7.15 drops the connection
string's port when it builds the WebSocket URL (sync clients dial ``ws://host/$servicebus/websocket``
on port 80, async ones port 443); passing the endpoint again as ``custom_endpoint_address`` keeps it,
which an emulator on a port of its own needs::

    ServiceBusClient.from_connection_string(conn, **websocket_options(conn))
"""

from __future__ import annotations

import urllib.parse
from typing import Any


def endpoint_of(connection_string: str) -> str:
    """``sb://host:port`` from a connection string."""
    for part in connection_string.split(";"):
        key, _, value = part.partition("=")
        if key.strip().lower() == "endpoint":
            return f"sb://{urllib.parse.urlsplit(value.strip()).netloc}"
    raise ValueError("the connection string has no Endpoint")


def websocket_options(connection_string: str) -> dict[str, Any]:
    """Keyword arguments for ``ServiceBusClient.from_connection_string``: AMQP over WebSockets."""
    from azure.servicebus import TransportType

    return {
        "transport_type": TransportType.AmqpOverWebsocket,
        "custom_endpoint_address": endpoint_of(connection_string),
    }
