"""The administration (ATOM over HTTP) client for a connection, found without guessing.

Azure serves the API over HTTPS on the namespace host. The embedded emulator serves it over plain
HTTP on its AMQP port (it tells HTTP from AMQP by the first bytes), so the address is the one in
the connection string whether the emulator runs in this process, as ``sbnotebook emulator
--port 0``, or on another host. The SDK's admin client always speaks HTTPS, so for the emulator it
gets a transport that keeps host and port and only switches the scheme.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from azure.core.pipeline.transport import RequestsTransport


class PlainHttpTransport(RequestsTransport):
    """Sends the admin client's ``https://host:port/...`` requests as ``http://host:port/...``."""

    def send(self, request: Any, **kwargs: Any) -> Any:
        parts = urllib.parse.urlsplit(request.url)
        if parts.scheme == "https":
            request.url = urllib.parse.urlunsplit(("http", parts.netloc, parts.path, parts.query, parts.fragment))
        return super().send(request, **kwargs)


def admin_client(
    *, connection_string: str | None, namespace: str, emulator: bool, credential: Any = None, timeout: float = 10.0
) -> Any:
    """A ``ServiceBusAdministrationClient`` for these settings (a short timeout: calls are interactive)."""
    from azure.servicebus.management import ServiceBusAdministrationClient

    # azure-core's default retries a refused connection for ~5 s: an interactive call should fail fast.
    kwargs: dict[str, Any] = {"retry_total": 1, "retry_backoff_factor": 0.2}
    if connection_string is None:
        return ServiceBusAdministrationClient(namespace, credential, **kwargs)
    if emulator:
        kwargs["transport"] = PlainHttpTransport(connection_timeout=min(timeout, 5.0), read_timeout=timeout)
    return ServiceBusAdministrationClient.from_connection_string(connection_string, **kwargs)
