"""Point ``ServiceBusAdministrationClient`` at the emulator.

The SDK's admin client always speaks HTTPS to the namespace host (the AMQP
endpoint), even with ``UseDevelopmentEmulator=true``. The emulator serves its
administration API over plain HTTP on a port of its own, so the client gets a
transport that rewrites ``https://host:amqp-port/...`` to ``http://host:admin-port/...``::

    from sbnotebook.emulator.admin_client import emulator_admin_client
    admin = emulator_admin_client(connection_string, admin_port=5673)
    admin.get_queue_runtime_properties("orders").active_message_count
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from azure.core.pipeline.transport import RequestsTransport


class EmulatorAdminTransport(RequestsTransport):
    """An azure-core transport that sends the admin client's requests to the emulator's HTTP port."""

    def __init__(self, host: str, port: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._netloc = f"{host}:{port}"

    def send(self, request: Any, **kwargs: Any) -> Any:
        parts = urllib.parse.urlsplit(request.url)
        request.url = urllib.parse.urlunsplit(("http", self._netloc, parts.path, parts.query, parts.fragment))
        return super().send(request, **kwargs)


def emulator_admin_client(connection_string: str, *, admin_port: int, host: str | None = None, **kwargs: Any) -> Any:
    """A ``ServiceBusAdministrationClient`` for an emulator's connection string and admin port."""
    from azure.servicebus.management import ServiceBusAdministrationClient

    if host is None:
        endpoint = next(
            (p.split("=", 1)[1] for p in connection_string.split(";") if p.lower().startswith("endpoint=")), ""
        )
        host = urllib.parse.urlsplit(endpoint).hostname or "127.0.0.1"
    transport = EmulatorAdminTransport(host, admin_port)
    return ServiceBusAdministrationClient.from_connection_string(connection_string, transport=transport, **kwargs)
