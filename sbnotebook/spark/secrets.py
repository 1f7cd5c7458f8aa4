"""Secret references: a connection string named by where it lives, resolved where it is used.

`.option("secretRef", "env:SERVICEBUS_CONNECTION_STRING")` (or `register(spark, "env:NAME")`) puts
only the reference in options, plans and event logs. The process that needs a connection - the one
that plans the read (the driver, or the Spark Connect server) and each executor task - resolves it
itself, from its own environment or Databricks secret scope, and keeps it in memory:

- ``env:NAME``           the environment variable NAME of that process;
- ``secret:SCOPE/KEY``   ``dbutils.secrets.get(SCOPE, KEY)`` where Databricks provides dbutils.

(Their form is checked in core/connections/credentials.py, which the notebook's ``%sb_connect --secret`` shares;
the old ``databricks:SCOPE/KEY`` is taken as ``secret:SCOPE/KEY`` until 0.3.0, with a warning.)

Entra ID needs no secret at all: the ``fullyQualifiedNamespace`` option (DefaultAzureCredential on
each process, see sbnotebook/core/connections/connection.py), or with ``credentialRef`` a credential each process
makes itself (sbnotebook/core/connections/credentials.py): ``callable:package.module:function`` (the plug point)
or ``service-credential:NAME`` (a Unity Catalog service credential: serverless has no environment
variables).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any

from ..core import (
    ConfigurationError,
    Connection,
    CredentialRef,
    SbError,
    credential_of,
    is_secret_ref,
    parse_credential_ref,
    parse_secret_ref,
    read_secret,
    resolve,
)

_resolved: dict[tuple[str, bool], Connection] = {}  # (ref, websockets), per process: workers are reused across tasks
_signed_in: dict[tuple[str, str, bool], Connection] = {}  # (namespace, credentialRef, websockets), per process
_lock = threading.Lock()


@dataclass(frozen=True, repr=False)
class SecretRef(CredentialRef):
    """Where a connection string lives (``env:NAME``, ``secret:scope/key``): a reference of the
    shape of core's CredentialRef (one printable string, safe to print, pickle and log), naming a
    secret instead of a credential. Never equal to a CredentialRef (dataclasses compare the class).
    ``websockets``: the connection it resolves to dials AMQP over WebSockets."""

    websockets: bool = False

    def __repr__(self) -> str:
        over = ", websockets=True" if self.websockets else ""
        return f"SecretRef({self.ref!r}{over})"

    @property
    def fully_qualified_namespace(self) -> str:
        """What logs and summaries show instead of the namespace (resolving it would read the secret)."""
        return f"secret {self.ref}"


@dataclass(frozen=True)
class EntraRef:
    """A namespace and where its token credential comes from (Entra ID, no key); safe to print,
    pickle and log. Each process makes the credential itself (``connection_of``)."""

    fully_qualified_namespace: str  # host[:port]
    credential: CredentialRef
    websockets: bool = False  # dial AMQP over WebSockets

    def __repr__(self) -> str:
        over = ", websockets=True" if self.websockets else ""
        return f"EntraRef({self.fully_qualified_namespace!r}, {self.credential.ref!r}{over})"


Source = Connection | SecretRef | EntraRef  # what options, register() and the readers carry


def over_websockets(source: Source) -> Source:
    """The same source, dialling AMQP over WebSockets (port 443) wherever it is resolved."""
    return source if source.websockets else replace(source, websockets=True)


def entra_ref(namespace: str, credential_ref: str) -> EntraRef:
    """``fullyQualifiedNamespace`` + ``credentialRef``, checked for form (nothing resolved here)."""
    host = resolve(fully_qualified_namespace=namespace).fully_qualified_namespace
    return EntraRef(host, parse_credential_ref(credential_ref))


def source_of(
    connection: str | Connection | None,
    *,
    namespace: str | None = None,
    credential: Any = None,
    websockets: bool = False,
) -> Source | None:
    """What register() and write() were given: a reference stays a reference (resolved by each Spark
    process), anything else is resolved here; None when nothing was given. ``websockets``: over
    WebSockets (``over_websockets``)."""
    found = _source_of(connection, namespace=namespace, credential=credential)
    return over_websockets(found) if websockets and found is not None else found


def _source_of(connection: str | Connection | None, *, namespace: str | None, credential: Any) -> Source | None:
    if credential is not None:
        if not isinstance(credential, str):
            raise ConfigurationError(
                "credential= takes a credential reference (callable:package.module:function or "
                "service-credential:NAME), "
                "not a credential object: each Spark process makes its own (an object would travel pickled "
                "inside the data source)."
            )
        if namespace is None or connection is not None:
            raise ConfigurationError(
                "credential= goes with fully_qualified_namespace= (a connection string or secret reference carries "
                "its own key)."
            )
        return entra_ref(namespace, credential)
    if isinstance(connection, str) and is_ref(connection):
        if namespace is not None:
            raise ConfigurationError("Give a connection string or a namespace, not both.")
        return parse_ref(connection)
    if connection is None and namespace is None:
        return None
    return resolve(connection, fully_qualified_namespace=namespace)


def is_ref(text: str) -> bool:
    return is_secret_ref(text)


def parse_ref(text: str) -> SecretRef:
    return SecretRef(parse_secret_ref(text))


def connection_of(source: Source) -> Connection:
    """The connection itself: resolved settings as they are, a reference read in this process (once)."""
    if isinstance(source, Connection):
        return source
    if isinstance(source, EntraRef):
        return _signed_in_connection(source)
    key = (source.ref, source.websockets)
    with _lock:
        found = _resolved.get(key)
    if found is None:
        # its own errors say what is missing; the secret is never shown
        secret = read_secret(source.ref, dbutils=_dbutils, option="servicebus: secretRef")
        try:
            found = resolve(secret, websockets=source.websockets)
        except SbError as exc:
            raise ConfigurationError(
                f"servicebus: the secret behind {source.ref} is not a Service Bus connection string "
                f"({type(exc).__name__})."
            ) from None
        with _lock:
            _resolved[key] = found
    return found


def _signed_in_connection(source: EntraRef) -> Connection:
    key = (source.fully_qualified_namespace, source.credential.ref, source.websockets)
    with _lock:
        found = _signed_in.get(key)
    if found is None:
        # dbutils matters only in a notebook process (settle() runs there); workers use
        # databricks.service_credentials (core/connections/credentials.py).
        made = credential_of(source.credential, dbutils=_dbutils())
        with _lock:
            found = _signed_in.setdefault(
                key,
                resolve(
                    fully_qualified_namespace=source.fully_qualified_namespace,
                    credential=made,
                    websockets=source.websockets,
                ),
            )
    return found


def _dbutils() -> Any:
    """dbutils where Databricks provides it: its runtime module, else the notebook's namespace."""
    try:
        from databricks.sdk.runtime import dbutils

        return dbutils
    except ImportError:  # no databricks-sdk: look in the notebook's namespace
        pass
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        return None
    return None if shell is None else shell.user_ns.get("dbutils")
