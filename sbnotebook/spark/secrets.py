"""Secret references: a connection string named by where it lives, resolved where it is used.

`.option("secretRef", "env:SERVICEBUS_CONNECTION_STRING")` (or `register(spark, "env:NAME")`) puts
only the reference in options, plans and event logs. The process that needs a connection - the one
that plans the read (the driver, or the Spark Connect server) and each executor task - resolves it
itself, from its own environment or Databricks secret scope, and keeps it in memory:

- ``env:NAME``               the environment variable NAME of that process;
- ``databricks:SCOPE/KEY``   ``dbutils.secrets.get(SCOPE, KEY)`` where Databricks provides dbutils.

Entra ID needs no secret at all: the ``fullyQualifiedNamespace`` option (DefaultAzureCredential on
each process, see sbnotebook/core/connection.py).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from ..core import ConfigurationError, Connection, SbError, resolve

SCHEMES = ("env", "databricks")
_resolved: dict[str, Connection] = {}  # per process: Python workers are reused across tasks
_lock = threading.Lock()


@dataclass(frozen=True)
class SecretRef:
    """Where a connection string lives; safe to print, pickle and log."""

    ref: str

    def __repr__(self) -> str:
        return f"SecretRef({self.ref!r})"

    @property
    def namespace(self) -> str:
        """What logs and summaries show instead of the namespace (resolving it would read the secret)."""
        return f"secret {self.ref}"


def is_ref(text: str) -> bool:
    scheme = text.strip().split(":", 1)[0].lower()
    return ":" in text and scheme in SCHEMES and "endpoint=" not in text.lower()


def parse_ref(text: str) -> SecretRef:
    scheme, _, rest = text.strip().partition(":")
    scheme = scheme.lower()
    if scheme not in SCHEMES or not rest:
        raise ConfigurationError(
            f"servicebus: secretRef {text!r} is not a secret reference: use env:VARIABLE or databricks:scope/key."
        )
    if scheme == "databricks" and rest.count("/") != 1:
        raise ConfigurationError(f"servicebus: secretRef {text!r} needs a scope and a key: databricks:scope/key.")
    return SecretRef(f"{scheme}:{rest}")


def connection_of(source: Connection | SecretRef) -> Connection:
    """The connection itself: resolved settings as they are, a reference read in this process (once)."""
    if isinstance(source, Connection):
        return source
    with _lock:
        found = _resolved.get(source.ref)
    if found is None:
        secret = _secret(source.ref)  # its own errors say what is missing; the secret is never shown
        try:
            found = resolve(secret)
        except SbError as exc:
            raise ConfigurationError(
                f"servicebus: the secret behind {source.ref} is not a Service Bus connection string "
                f"({type(exc).__name__})."
            ) from None
        with _lock:
            _resolved[source.ref] = found
    return found


def _secret(ref: str) -> str:
    scheme, _, rest = ref.partition(":")
    if scheme == "env":
        value = os.environ.get(rest)
        if not value:
            raise ConfigurationError(
                f"servicebus: secretRef {ref}: {rest} is not set in the environment of this process "
                f"(pid {os.getpid()}); on a cluster set it for the driver and the executors."
            )
        return value
    scope, _, key = rest.partition("/")
    dbutils = _dbutils()
    if dbutils is None:
        raise ConfigurationError(
            f"servicebus: secretRef {ref} needs Databricks' dbutils, which this process does not have "
            "(outside Databricks, or a worker without it): set an environment variable from the secret in "
            "the cluster configuration (NAME={{secrets/" + rest + "}}) and use secretRef env:NAME."
        )
    try:
        return str(dbutils.secrets.get(scope=scope, key=key))
    except Exception as exc:  # the text of a secrets error is not shown: it is not ours to vet
        raise ConfigurationError(f"servicebus: could not read secret {scope}/{key} ({type(exc).__name__}).") from None


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
