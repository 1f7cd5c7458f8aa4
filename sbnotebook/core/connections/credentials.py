"""Credential and secret references: a token credential or a connection string named by where it comes
from, made or read where it is used.

A *credential reference* is a short, printable string; the process that needs to sign in (a notebook,
a Spark driver or Connect server, each executor) turns it into an azure-core ``TokenCredential``
itself and keeps it for the life of the process:

- ``callable:package.module:function``  calls ``function()`` (any zero-argument callable, a class
  included: ``callable:azure.identity:ManagedIdentityCredential``) and uses what it returns. The
  plug point for any way of signing in; the module must be importable on every process.
- ``service-credential:NAME``  the Unity Catalog service credential NAME: ``databricks.service_credentials.
  getServiceCredentialsProvider(NAME)`` where Databricks provides it (UDFs and data source workers,
  serverless included), else ``dbutils.credentials.getServiceCredentialsProvider(NAME)`` (notebooks).
  Elsewhere it is an error that says so: there is no fallback to another way of signing in.

A *secret reference* names where a connection string lives (``secretRef``, ``register(spark, REF)``,
``%sb_connect --secret REF``; resolved by sbnotebook/spark/secrets.py and the magic): ``env:NAME``, the
environment variable of the process that reads it, or ``secret:SCOPE/KEY``, a Databricks secret
(``dbutils.secrets.get(SCOPE, KEY)``). Each prefix names the thing it reads, so a reference says what
it is wherever it is written. The prefix ``databricks:`` meant either (a secret as ``databricks:scope/key``,
a service credential as ``databricks:NAME``); it still works for one release, with a warning
(docs/names.md).

Used with a namespace (``core.connect(fully_qualified_namespace=..., credential=credential_of(ref))``, the Spark
options ``fullyQualifiedNamespace`` + ``credentialRef``, ``%sb_connect --fully-qualified-namespace NS --credential
REF``). Nothing here holds a key: the credential object is made in memory and never printed.
"""

from __future__ import annotations

import importlib
import inspect
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from ..renames import deprecated

SCHEMES = ("callable", "service-credential")
SECRET_SCHEMES = ("env", "secret")
OLD_SCHEME = "databricks"  # before 0.2: a service credential (NAME) or a secret (scope/key); warns
_made: dict[str, Any] = {}  # per process: Spark's Python workers are reused across tasks
_lock = threading.Lock()


@dataclass(frozen=True)
class CredentialRef:
    """Where a token credential comes from; safe to print, pickle and log."""

    ref: str

    def __repr__(self) -> str:
        return f"CredentialRef({self.ref!r})"


def is_credential_ref(text: object) -> bool:
    if not isinstance(text, str) or ":" not in text:
        return False
    return text.strip().split(":", 1)[0].lower() in (*SCHEMES, OLD_SCHEME)


def parse_credential_ref(text: str) -> CredentialRef:
    """Check the form only (nothing is imported or called here: that happens where it is used)."""
    scheme, _, rest = str(text).strip().partition(":")
    scheme = scheme.lower()
    rest = rest.strip()
    usage = "use callable:package.module:function or service-credential:NAME"
    if scheme == OLD_SCHEME and rest and "/" not in rest:
        deprecated("credentialRef databricks:NAME", "service-credential:NAME", stacklevel=2)
        scheme = "service-credential"
    if scheme in (*SECRET_SCHEMES, OLD_SCHEME) and rest:
        raise ConfigurationError(
            f"servicebus: credentialRef {text!r} is not a credential reference: it names where a connection "
            f"string lives (a secretRef); {usage}."
        )
    if scheme not in SCHEMES or not rest:
        raise ConfigurationError(f"servicebus: credentialRef {text!r} is not a credential reference: {usage}.")
    if scheme == "callable":
        module, sep, attr = rest.partition(":")
        if not sep or not module or not attr or not all(p.isidentifier() for p in module.split(".") + attr.split(".")):
            raise ConfigurationError(
                f"servicebus: credentialRef {text!r} needs a module and a function: callable:package.module:function."
            )
    elif "/" in rest:
        raise ConfigurationError(
            f"servicebus: credentialRef {text!r}: service-credential:NAME names a Unity Catalog service "
            "credential; a secret scope and key is a secretRef (secret:scope/key)."
        )
    return CredentialRef(f"{scheme}:{rest}")


def is_secret_ref(text: object) -> bool:
    """Whether ``text`` is written as a secret reference (a connection string never starts so)."""
    if not isinstance(text, str) or ":" not in text or "endpoint=" in text.lower():
        return False
    scheme, _, rest = text.strip().partition(":")
    scheme = scheme.lower()
    return scheme in SECRET_SCHEMES or (scheme == OLD_SCHEME and "/" in rest)


def parse_secret_ref(text: str, *, option: str = "secretRef") -> str:
    """The reference in its one spelling (``env:NAME``, ``secret:SCOPE/KEY``), its form checked;
    nothing is read here. ``databricks:SCOPE/KEY`` is taken as ``secret:SCOPE/KEY`` and warns."""
    scheme, _, rest = str(text).strip().partition(":")
    scheme, rest = scheme.lower(), rest.strip()
    if scheme == OLD_SCHEME and "/" in rest:
        deprecated(f"{option} databricks:SCOPE/KEY", "secret:SCOPE/KEY", stacklevel=2)
        scheme = "secret"
    if scheme not in SECRET_SCHEMES or not rest:
        raise ConfigurationError(
            f"servicebus: {option} {text!r} is not a secret reference: use env:VARIABLE or secret:scope/key."
        )
    if scheme == "secret" and (rest.count("/") != 1 or not all(rest.split("/"))):
        raise ConfigurationError(f"servicebus: {option} {text!r} needs a scope and a key: secret:scope/key.")
    return f"{scheme}:{rest}"


def read_secret(ref: str, *, dbutils: Callable[[], Any] | None = None, option: str = "secret") -> str:
    """The connection string a secret reference (``parse_secret_ref``'s spelling) names, read in this
    process: ``env:NAME`` from its environment, ``secret:SCOPE/KEY`` through ``dbutils()`` (the
    caller's way to Databricks' dbutils; None or None returned: not here). ``option`` begins each
    error, which never shows the secret."""
    scheme, _, rest = ref.partition(":")
    if scheme == "env":
        value = os.environ.get(rest)
        if not value:
            raise ConfigurationError(
                f"{option} {ref}: {rest} is not set in the environment of this process "
                f"(pid {os.getpid()}); on a cluster set it for the driver and the executors."
            )
        return value
    scope, _, key = rest.partition("/")
    found = dbutils() if dbutils is not None else None
    if found is None:
        raise ConfigurationError(
            f"{option} {ref} needs Databricks' dbutils, which this process does not have "
            "(outside Databricks, or a worker without it): set an environment variable from the secret in "
            "the cluster configuration (NAME={{secrets/" + rest + "}}) and use env:NAME."
        )
    try:
        return str(found.secrets.get(scope=scope, key=key))
    except Exception as exc:  # the text of a secrets error is not shown: it is not ours to vet
        raise ConfigurationError(f"{option}: could not read secret {scope}/{key} ({type(exc).__name__}).") from None


def credential_of(ref: CredentialRef, *, dbutils: Any = None) -> Any:
    """The token credential behind ``ref``, made in this process once and kept. ``dbutils`` is the
    notebook's, where the caller has it (core cannot look into a notebook's namespace)."""
    with _lock:
        found = _made.get(ref.ref)
    if found is not None:
        return found
    scheme, _, rest = ref.ref.partition(":")
    made = _from_callable(ref.ref, rest) if scheme == "callable" else _service_credential(ref.ref, rest, dbutils)
    get_token = getattr(made, "get_token", None)
    if not callable(get_token):
        raise ConfigurationError(
            f"servicebus: credentialRef {ref.ref} gave a {type(made).__name__}, not an azure-core TokenCredential "
            "(an object with get_token(*scopes))."
        )
    if inspect.iscoroutinefunction(get_token):
        # The management client is synchronous; the kit wraps a sync credential for its async AMQP client.
        raise ConfigurationError(
            f"servicebus: credentialRef {ref.ref} gave an async credential; return a sync TokenCredential "
            "(azure.identity, not azure.identity.aio)."
        )
    with _lock:
        return _made.setdefault(ref.ref, made)


def _from_callable(ref: str, target: str) -> Any:
    module_name, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(
            f"servicebus: credentialRef {ref}: cannot import {module_name} in this process (pid {os.getpid()}): "
            f"{type(exc).__name__}: {exc}. It must be installed on the driver and every executor."
        ) from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigurationError(f"servicebus: credentialRef {ref}: {module_name} has no {attr}.") from None
    if not callable(obj):
        raise ConfigurationError(f"servicebus: credentialRef {ref}: {module_name}:{attr} is not callable.")
    try:
        return obj()
    except ConfigurationError:
        raise
    except Exception as exc:  # the message may hold what the callable read; only its kind is shown
        raise ConfigurationError(
            f"servicebus: credentialRef {ref}: {module_name}:{attr}() failed ({type(exc).__name__})."
        ) from None


def _service_credential(ref: str, name: str, dbutils: Any) -> Any:
    """Databricks documents two entry points: ``databricks.service_credentials`` in UDFs (the
    executors' Python workers, where dbutils does not exist) and ``dbutils.credentials`` in notebooks."""
    provider: Any = None
    try:
        from databricks.service_credentials import getServiceCredentialsProvider  # type: ignore[import-not-found,unused-ignore]

        provider = getServiceCredentialsProvider
    except ImportError:  # not a Databricks worker: try the notebook's dbutils below
        pass
    why = ""
    if provider is None:
        if dbutils is None:
            dbutils = _runtime_dbutils()
        try:
            provider = getattr(getattr(dbutils, "credentials", None), "getServiceCredentialsProvider", None)
        except Exception as exc:  # databricks-sdk's dbutils outside a workspace raises when used
            why = f" (dbutils: {type(exc).__name__})"
    if provider is None:
        raise ConfigurationError(
            f"servicebus: credentialRef {ref} needs Databricks' Unity Catalog service credentials "
            "(Databricks Runtime 15.4 LTS or later, or serverless), which this process "
            f"(pid {os.getpid()}) does not have{why}: outside Databricks use callable:package.module:function."
        )
    try:
        return provider(name)
    except Exception as exc:  # Databricks' text is not ours to vet: its kind only
        raise ConfigurationError(
            f"servicebus: could not get the service credential {name!r} ({type(exc).__name__}): does it exist, "
            "and do you have ACCESS on it?"
        ) from None


def _runtime_dbutils() -> Any:
    try:
        from databricks.sdk.runtime import dbutils  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:  # no databricks-sdk: not on Databricks
        return None
    return dbutils
