"""The administration (ATOM over HTTP) client for a connection, found without guessing.

Azure serves the API over HTTPS on the namespace host. The embedded emulator serves it over plain
HTTP on its AMQP port (it tells HTTP from AMQP by the first bytes), so the address is the one in
the connection string whether the emulator runs in this process, as ``sbnotebook emulator
--port 0``, or on another host. The SDK's admin client always speaks HTTPS, so for the emulator it
gets a transport that switches the scheme (and, for an emulator's separate ``--admin-port``, the
port).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from azure.core.pipeline.transport import RequestsTransport

from .. import trust
from ..connection_string import canonical, endpoint_netloc


def _plain_http(url: str, netloc: str | None) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(("http", netloc or parts.netloc, parts.path, parts.query, parts.fragment))


class PlainHttpTransport(RequestsTransport):
    """Sends the admin client's ``https://host:port/...`` requests as ``http://host:port/...``
    (to ``netloc`` instead, when given)."""

    def __init__(self, netloc: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._netloc = netloc

    def send(self, request: Any, **kwargs: Any) -> Any:
        request.url = _plain_http(request.url, self._netloc)
        return super().send(request, **kwargs)


def plain_http_transport_async(netloc: str | None = None, **kwargs: Any) -> Any:
    """The async twin (for ``azure.servicebus.aio.management``); needs aiohttp."""
    from azure.core.pipeline.transport import AioHttpTransport

    class _PlainHttp(AioHttpTransport):
        async def send(self, request: Any, **kw: Any) -> Any:
            request.url = _plain_http(request.url, netloc)
            return await super().send(request, **kw)

    return _PlainHttp(**kwargs)


def admin_client(
    *, connection_string: str | None, namespace: str, emulator: bool, credential: Any = None, timeout: float = 10.0
) -> Any:
    """A ``ServiceBusAdministrationClient`` for these settings (fails fast: calls are interactive)."""
    from azure.servicebus.management import ServiceBusAdministrationClient

    # azure-core's default retries a refused connection for ~5 s: an interactive call should fail fast.
    kwargs: dict[str, Any] = {"retry_total": 1, "retry_backoff_factor": 0.2}
    bundle = trust.ca_bundle()
    if bundle is not None and not emulator:
        kwargs["connection_verify"] = bundle  # the configured CAs, as for AMQP (trust.py)
    if connection_string is None:
        return ServiceBusAdministrationClient(namespace, credential, **kwargs)
    if emulator:
        kwargs["transport"] = PlainHttpTransport(connection_timeout=min(timeout, 5.0), read_timeout=timeout)
    return ServiceBusAdministrationClient.from_connection_string(canonical(connection_string), **kwargs)


def emulator_admin_client(connection_string: str, *, port: int | None = None, aio: bool = False, **kwargs: Any) -> Any:
    """The SDK's ``ServiceBusAdministrationClient`` (``aio=True``: the async one) for an emulator's
    connection string (``Emulator().connection_string``, ``sbnotebook emulator``): the emulator serves
    the administration API over plain HTTP on its AMQP port, which the SDK's client alone never
    speaks; ``port`` picks an emulator's separate ``--admin-port``; ``kwargs`` go to the SDK."""
    host = urllib.parse.urlsplit(f"//{endpoint_netloc(connection_string)}").hostname
    connection_string = canonical(connection_string)  # as the SDK's parser reads it
    netloc = f"{host}:{port}" if port is not None else None
    if aio:
        from azure.servicebus.aio.management import ServiceBusAdministrationClient as AsyncAdmin

        return AsyncAdmin.from_connection_string(
            connection_string, transport=plain_http_transport_async(netloc), **kwargs
        )
    from azure.servicebus.management import ServiceBusAdministrationClient

    return ServiceBusAdministrationClient.from_connection_string(
        connection_string, transport=PlainHttpTransport(netloc), **kwargs
    )
