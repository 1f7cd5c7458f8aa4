"""Point ``ServiceBusAdministrationClient`` at the emulator.

The SDK's admin client always speaks HTTPS to the namespace host (the AMQP
endpoint), even with ``UseDevelopmentEmulator=true``. The emulator serves its
administration API over plain HTTP on the AMQP port itself (and optionally on a
port of its own), so the client gets a transport that rewrites
``https://host:amqp-port/...`` to ``http://host:port/...``::

    from sbnotebook.emulator.admin_client import emulator_admin_client
    admin = emulator_admin_client(connection_string)          # the AMQP port
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


def emulator_admin_client(
    connection_string: str, *, admin_port: int | None = None, host: str | None = None, **kwargs: Any
) -> Any:
    """A ``ServiceBusAdministrationClient`` for an emulator's connection string (its AMQP port serves
    the API; ``admin_port`` picks another)."""
    from azure.servicebus.management import ServiceBusAdministrationClient

    endpoint = next((p.split("=", 1)[1] for p in connection_string.split(";") if p.lower().startswith("endpoint=")), "")
    parts = urllib.parse.urlsplit(endpoint)
    if host is None:
        host = parts.hostname or "127.0.0.1"
    if admin_port is None:
        admin_port = parts.port or 5672
    transport = EmulatorAdminTransport(host, admin_port)
    return ServiceBusAdministrationClient.from_connection_string(connection_string, transport=transport, **kwargs)


class EmulatorAdminTransportAsync:
    """The async twin of ``EmulatorAdminTransport`` (for ``azure.servicebus.aio.management``), built on aiohttp."""

    def __new__(cls, host: str, port: int, **kwargs: Any) -> Any:
        from azure.core.pipeline.transport import AioHttpTransport

        netloc = f"{host}:{port}"

        class _Rewriting(AioHttpTransport):
            async def send(self, request: Any, **kw: Any) -> Any:
                parts = urllib.parse.urlsplit(request.url)
                request.url = urllib.parse.urlunsplit(("http", netloc, parts.path, parts.query, parts.fragment))
                return await super().send(request, **kw)

        return _Rewriting(**kwargs)


def emulator_admin_client_async(
    connection_string: str, *, admin_port: int | None = None, host: str | None = None, **kwargs: Any
) -> Any:
    """An async ``ServiceBusAdministrationClient`` (``azure.servicebus.aio.management``) for an emulator."""
    from azure.servicebus.aio.management import ServiceBusAdministrationClient

    endpoint = next((p.split("=", 1)[1] for p in connection_string.split(";") if p.lower().startswith("endpoint=")), "")
    parts = urllib.parse.urlsplit(endpoint)
    transport = EmulatorAdminTransportAsync(host or parts.hostname or "127.0.0.1", admin_port or parts.port or 5672)
    return ServiceBusAdministrationClient.from_connection_string(connection_string, transport=transport, **kwargs)
