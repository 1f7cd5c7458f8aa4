"""Where Service Bus is, resolved in a fixed order:

1. an explicit argument (a connection string, or ``fully_qualified_namespace=`` for Entra ID);
2. ``SERVICEBUS_CONNECTION_STRING``;
3. ``SERVICEBUS_FULLY_QUALIFIED_NAMESPACE`` with ``DefaultAzureCredential``;
4. otherwise the shared embedded emulator: one detached, durable emulator process per user and
   machine, started by the first kernel that needs it and found by every later one, so notebooks
   see each other's messages and keep them across kernel restarts (``sbnotebook.emulator.userprocess``:
   data and key in ``~/.sbnotebook/emulator/``, or ``$SBNOTEBOOK_HOME/emulator/``).

The key never appears in a repr, a log line or an error message.
"""

from __future__ import annotations

import logging
import os
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ...about import install
from ..connection_string import canonical, endpoint_netloc, names_the_emulator, parse_connection_string
from ..errors import ConfigurationError
from ..renames import deprecated, renamed
from ..sdk.api import TransportType, default_azure_credential

_log = logging.getLogger("sbnotebook.connection")
ENV_CONNECTION_STRING = "SERVICEBUS_CONNECTION_STRING"
"""The environment variable a connection string is read from when no connection is given."""
ENV_NAMESPACE = "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE"
"""The environment variable a namespace signed in to with Entra ID is read from when no connection
is given."""
Kind = Literal["connection-string", "entra-id", "emulator"]


@dataclass(frozen=True)
class Connection:
    """Resolved connection settings. Create clients from it; print it safely."""

    kind: Kind
    fully_qualified_namespace: str  # host[:port]
    entity_path: str | None = None
    _connection_string: str | None = field(default=None, repr=False, compare=False)
    home: str | None = None  # the shared emulator's directory (see sbnotebook.emulator.userprocess)
    credential: Any = field(default=None, repr=False, compare=False)  # Entra ID; None: DefaultAzureCredential
    websockets: bool = False  # AMQP over WebSockets (port 443, or the namespace's own port): core/sdk/websockets.py

    def __repr__(self) -> str:
        over = ", websockets=True" if self.websockets else ""
        return f"Connection(kind={self.kind!r}, fully_qualified_namespace={self.fully_qualified_namespace!r}{over})"

    def __str__(self) -> str:
        over = ", over WebSockets" if self.websockets else ""
        if self.home is not None:
            return (
                f"{self.fully_qualified_namespace} (the embedded emulator shared by your notebooks{over}; "
                f"messages kept in "
                f"{self.home}; stop or empty it: sbnotebook emulator --stop / --reset)"
            )
        where = "embedded emulator" if self.kind == "emulator" else self.kind
        return f"{self.fully_qualified_namespace} ({where}{over})"

    @property
    def namespace(self) -> str:
        """The old name of ``fully_qualified_namespace`` (the SDK's word, and the kit's keywords'), kept
        for one release."""
        deprecated("core.Connection.namespace", "core.Connection.fully_qualified_namespace")
        return self.fully_qualified_namespace

    @property
    def is_emulator(self) -> bool:
        return self.kind == "emulator"  # from_connection_string sets it from UseDevelopmentEmulator=true

    @property
    def connection_string(self) -> str | None:
        """The secret itself: hand it to an SDK client, never to a log or a display."""
        return self._connection_string


Connection.__init__ = renamed(namespace="fully_qualified_namespace")(Connection.__init__)  # type: ignore[method-assign]  # one release


# Entra ID's public clouds: azure-identity validates any other authority host by asking
# login.microsoftonline.com ("instance discovery") unless told not to.
MICROSOFT_AUTHORITY_HOSTS = frozenset(
    {"login.microsoftonline.com", "login.chinacloudapi.cn", "login.microsoftonline.us", "login.microsoftonline.de"}
)


def credential_options(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What the kit gives DefaultAzureCredential: the CA bundle it trusts (trust.py) for the token
    requests too, and, for an ``AZURE_AUTHORITY_HOST`` that is not a Microsoft cloud (a sovereign
    or private authority, the TLS emulator), ``disable_instance_discovery`` (else azure-identity
    asks login.microsoftonline.com about that host, which fails offline and for private hosts)."""
    from ..trust import ca_bundle

    env = os.environ if env is None else env
    options: dict[str, Any] = {}
    bundle = ca_bundle(env)
    if bundle is not None:
        options["connection_verify"] = bundle
    authority = env.get("AZURE_AUTHORITY_HOST", "")
    if authority:
        host = urllib.parse.urlsplit(authority if "://" in authority else f"https://{authority}").hostname or ""
        if host.lower() not in MICROSOFT_AUTHORITY_HOSTS:
            _log.info("AZURE_AUTHORITY_HOST %s is not a Microsoft cloud: instance discovery disabled", host)
            options["disable_instance_discovery"] = True
    return options


def default_credential(*, aio: bool = False) -> Any:
    """azure-identity's ``DefaultAzureCredential`` (Entra ID; ``aio=True``: the async one), with what
    the kit gives it (``credential_options()``: the CAs the kit trusts, no instance discovery for an
    authority that is not a Microsoft cloud). Raises ``ConfigurationError`` saying how to install
    azure-identity when it is missing."""
    try:
        return default_azure_credential(aio=aio, **credential_options())
    except ImportError:
        raise ConfigurationError(
            f"Connecting with Entra ID needs azure-identity: {install().pip_install('notebook')}."
        ) from None


def from_connection_string(text: str) -> Connection:
    fields = parse_connection_string(text)
    host = endpoint_netloc(text)
    kind: Kind = "emulator" if names_the_emulator(text) else "connection-string"
    # TransportType=AmqpWebSockets: the .NET SDK's setting (the Python SDK does not read it; the kit does).
    websockets = fields.get("transporttype", "").lower() == "amqpwebsockets"
    return Connection(kind, host, fields.get("entitypath"), canonical(text), websockets=websockets)


def tls_port_options(fully_qualified_namespace: str) -> dict[str, Any]:
    """The SDK client's options that make it dial the port in ``host:port`` over TLS: without a custom
    endpoint the SDK dials 5671 whatever port it is given (and with one alone it speaks WebSockets).
    Empty for a bare host name (Azure's own ports)."""
    if urllib.parse.urlsplit(f"//{fully_qualified_namespace}").port is not None:
        return {"custom_endpoint_address": f"sb://{fully_qualified_namespace}", "transport_type": TransportType.Amqp}
    return {}


def async_credential(given: Any = None) -> Any:
    """An async token credential for the async SDK client: ``given`` as it is if async, wrapped if
    sync (its get_token runs on a worker thread), else DefaultAzureCredential."""
    if given is None:
        return default_credential(aio=True)
    import inspect

    if inspect.iscoroutinefunction(getattr(given, "get_token", None)):
        return given
    return _AsyncFromSync(given)


class _AsyncFromSync:
    """A sync ``TokenCredential`` seen as an ``AsyncTokenCredential``."""

    def __init__(self, sync: Any) -> None:
        self._sync = sync

    def __repr__(self) -> str:
        return f"<async {type(self._sync).__name__}>"

    async def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        import asyncio

        return await asyncio.to_thread(self._sync.get_token, *scopes, **kwargs)

    async def close(self) -> None:
        """Nothing to release: the sync credential is the caller's, theirs to close."""

    async def __aenter__(self) -> _AsyncFromSync:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()  # as azure-identity's credentials do


def from_namespace(namespace: str, credential: Any = None) -> Connection:
    host = namespace.strip()
    if "://" in host:
        host = urllib.parse.urlsplit(host).netloc
    host = host.strip("/")
    if not host or " " in host:
        raise ConfigurationError(
            f"{namespace!r} is not a namespace host name such as 'contoso.servicebus.windows.net'."
        )
    return Connection("entra-id", host, credential=credential)


class _EmbeddedEmulator:
    """The shared emulator as this process found it: checked on each use and started if it is gone
    (it outlives the process on purpose; ``sbnotebook emulator --stop`` stops it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: Any = None

    def connection(self) -> Connection:
        from ...emulator import DEFAULT_KEY_NAME, connection_string, userprocess

        with self._lock:
            self._running = userprocess.ensure()
            run = self._running
        text = connection_string(run.host, run.port, DEFAULT_KEY_NAME, run.key)
        return Connection("emulator", f"{run.host}:{run.port}", None, text, home=str(run.directory))

    @property
    def running(self) -> Any:
        """The shared emulator this process has used (host, port, pid), or None."""
        return self._running


embedded = _EmbeddedEmulator()


@renamed(namespace="fully_qualified_namespace")
def resolve(
    connection: str | Connection | None = None,
    *,
    fully_qualified_namespace: str | None = None,
    credential: Any = None,
    websockets: bool = False,
    env: Mapping[str, str] | None = None,
) -> Connection:
    """Resolve where Service Bus is, in the documented order; ``websockets``: dial AMQP over
    WebSockets (port 443) instead of AMQP (5671), for networks that allow only HTTPS out."""
    found = _resolve(connection, namespace=fully_qualified_namespace, credential=credential, env=env)
    return replace(found, websockets=True) if websockets and not found.websockets else found


def _resolve(
    connection: str | Connection | None, *, namespace: str | None, credential: Any, env: Mapping[str, str] | None
) -> Connection:
    if credential is not None and namespace is None:
        raise ConfigurationError(
            "A credential goes with fully_qualified_namespace= (a connection string carries its own key)."
        )
    if isinstance(credential, str):  # a credential reference (core/connections/credentials.py), made in this process
        from .credentials import credential_of, parse_credential_ref

        credential = credential_of(parse_credential_ref(credential))
    if isinstance(connection, Connection):
        return connection
    if connection is not None and namespace is not None:
        raise ConfigurationError("Give a connection string or a namespace, not both.")
    if connection is not None:
        return from_connection_string(connection)
    if namespace is not None:
        return from_namespace(namespace, credential)
    env = os.environ if env is None else env
    if env.get(ENV_CONNECTION_STRING):
        return from_connection_string(env[ENV_CONNECTION_STRING])
    if env.get(ENV_NAMESPACE):
        return from_namespace(env[ENV_NAMESPACE])
    return embedded.connection()
