"""%sb_connect: choose the namespace and open the live connection every command uses; with
``--as NAME``, a named connection beside it (``NAME:ENTITY`` in any command); ``--list`` shows them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ... import core
from ...about import versions_line
from ...core import deprecated
from .command import command, one_line, parser

if TYPE_CHECKING:
    from .state import MagicsState

CONNECT = parser(
    "sb_connect",
    "Choose the Service Bus namespace. With nothing configured, use the embedded emulator.",
    "  %sb_connect                                   # env settings, else the embedded emulator\n"
    "  %sb_connect $conn_str                         # a connection string held in a variable\n"
    "  %sb_connect --fully-qualified-namespace contoso.servicebus.windows.net  # Entra ID (DefaultAzureCredential)\n"
    "  %sb_connect --fully-qualified-namespace NS --credential service-credential:my-sb  # a Unity Catalog\n"
    "                                                # service credential\n"
    "  %sb_connect --secret secret:my-scope/servicebus   # a Databricks secret (scope/key)\n"
    "  %sb_connect --secret env:SERVICEBUS_PROD      # an environment variable\n"
    "  %sb_connect --emulator                        # the embedded emulator, whatever is configured\n"
    "  %sb_connect --as prod $prod_conn_str          # a named connection: %sb_peek prod:orders\n"
    "  %sb_connect --as home --emulator              # the embedded emulator, named home\n"
    "  %sb_connect --fully-qualified-namespace NS --websockets  # AMQP over WebSockets (443): 5671 blocked\n"
    "  %sb_connect --trace                           # the SDK's OpenTelemetry spans too (docs/tracing.md)\n"
    "  %sb_connect --list                            # the connections (never a key)",
)
CONNECT.add_argument("connection", nargs="?", help="a connection string (never echoed)")
CONNECT.add_argument(
    "--fully-qualified-namespace",
    metavar="FQDN",
    help="the namespace's host name (contoso.servicebus.windows.net), signed in with DefaultAzureCredential",
)
CONNECT.add_argument(
    "--credential",
    metavar="REF",
    help="with --fully-qualified-namespace: sign in with service-credential:NAME (a Unity Catalog service "
    "credential) or callable:package.module:function (returns an azure-core TokenCredential)",
)
CONNECT.add_argument(
    "--secret",
    metavar="REF",
    help="read the connection string from a secret reference: secret:SCOPE/KEY (a Databricks secret) or env:NAME",
)
CONNECT.add_argument("--emulator", action="store_true", help="use the embedded emulator")
CONNECT.add_argument(
    "--websockets",
    action="store_true",
    help="dial AMQP over WebSockets (port 443) where port 5671 is blocked (needs the websockets extra)",
)
CONNECT.add_argument(
    "--trace",
    action="store_true",
    help="turn the azure-servicebus SDK's OpenTelemetry tracing on for this connection's operations, beside the "
    "kit's own spans (needs the tracing extra: docs/tracing.md)",
)
CONNECT.add_argument(
    "--as",
    dest="name",
    metavar="NAME",
    help="keep this connection under NAME beside the default one (NAME:ENTITY names its entities)",
)
CONNECT.add_argument("--list", action="store_true", help="show the connections: the default and the named ones")
CONNECT.rename("--namespace", "--fully-qualified-namespace")  # the SDK's word, and Spark's option's


def _forget(self: MagicsState, exc: BaseException, args: argparse.Namespace | None) -> None:
    """A failed %sb_connect leaves no connection where it was meant to make one: commands fail
    (saying why) until a connect succeeds, instead of going on against the previous namespace or the
    embedded emulator. A failed ``--as NAME`` forgets NAME only; a failed --list changes nothing."""
    if args is not None and args.list:
        return
    if args is not None and args.name is not None:
        self.connections.pop(args.name, None)
        return
    self.connection = None
    self.connect_failed = one_line(exc)


@command(CONNECT, on_failure=_forget)
def sb_connect(self: MagicsState, args: argparse.Namespace) -> Any:
    namespace = args.fully_qualified_namespace
    chosen = [x for x in (args.connection, namespace, args.secret) if x] + ([True] if args.emulator else [])
    if args.list:
        if chosen or args.name or args.trace:
            raise UsageError("%sb_connect --list takes no other option.")
        return listing(self)
    if len(chosen) > 1:
        raise UsageError("%sb_connect: give one of CONNECTION, --fully-qualified-namespace, --secret or --emulator.")
    if args.credential and not namespace:
        raise UsageError(
            "%sb_connect: --credential goes with --fully-qualified-namespace (a connection string carries its own key)."
        )
    if args.name is not None:
        if not core.CONNECTION_NAME.match(args.name):
            raise UsageError(
                f"%sb_connect --as {args.name}: a name is letters, digits, '_' and '-', starting with a letter."
            )
        if not chosen:
            raise UsageError(
                f"%sb_connect --as {args.name}: give CONNECTION, --fully-qualified-namespace, --secret or --emulator."
            )
    websockets = args.websockets or self.websockets  # the flag, or the setting
    if args.emulator:
        conn = core.connect(core.resolve(env={}), websockets=websockets)  # nothing configured: the embedded emulator
    elif args.secret:
        conn = core.connect(secret_value(self, args.secret), websockets=websockets)
    elif namespace and args.credential:
        credential = named_credential(self, args.credential)
        conn = core.connect(fully_qualified_namespace=namespace, credential=credential, websockets=websockets)
    elif args.connection or namespace:
        conn = core.connect(args.connection, fully_qualified_namespace=namespace, websockets=websockets)
    elif self.connection is not None and (self.connection.settings.websockets or not websockets):
        conn = self.connection
    else:  # the current connection's namespace (else the resolved default), over WebSockets
        conn = core.connect(self.connection.settings if self.connection else None, websockets=websockets)
    if args.trace:
        core.connect(conn.settings, trace=True)  # the same live connection; the tracing extra missing: said
        print("Traced: the SDK's spans for this connection's operations join the kit's (OpenTelemetry).")
    if self.completer is not None:
        self.completer.names_of(conn).top(wait=0)  # Tab finds the names: listed now, in the background
    if args.name is not None:
        replaced = args.name in self.connections
        self.connections[args.name] = conn
        print(f"{args.name} {'now names' if replaced else 'names'} {conn.settings}: {args.name}:ENTITY in any command.")
        return None
    self.connection = conn
    self.connect_failed = None
    print(f"Connected to {conn.settings}.")
    print(versions_line())  # the kit's, the SDK's and Python's versions, for a bug report
    return None


def listing(self: MagicsState) -> Any:
    """The connections as a table: name (blank for the default), namespace, how it signs in. The
    settings' own text never holds a key (core.Connection)."""
    import pandas as pd

    rows = []
    if self.connection is not None:
        rows.append(_row("(default)", self.connection))
    rows.extend(_row(name, conn) for name, conn in sorted(self.connections.items()))
    if not rows:
        print("No connection yet: the first command connects (%sb_connect chooses; --as NAME adds a named one).")
    return pd.DataFrame(rows, columns=["name", "namespace", "kind", "entities"])


def _row(name: str, conn: Any) -> dict[str, str]:
    prefix = "" if name == "(default)" else f"{name}:"
    return {
        "name": name,
        "namespace": conn.fully_qualified_namespace,
        "kind": "embedded emulator" if conn.is_emulator else conn.settings.kind,
        "entities": f"{prefix}ENTITY",
    }


def named_credential(self: MagicsState, ref: str) -> Any:
    """The token credential a reference names, made here; dbutils is the notebook's, where it has one."""
    dbutils = self.shell.user_ns.get("dbutils") if self.shell is not None else None
    return core.credential_of(core.parse_credential_ref(ref), dbutils=dbutils)


def secret_value(self: MagicsState, spec: str) -> str:
    """The connection string a secret reference names (the same references as Spark's secretRef),
    read here. A bare SCOPE/KEY (the old form) is a Databricks secret and warns once."""
    if not core.is_secret_ref(spec) and spec.count("/") == 1 and ":" not in spec:
        deprecated("%sb_connect --secret SCOPE/KEY", "%sb_connect --secret secret:SCOPE/KEY", stacklevel=2)
        spec = f"secret:{spec}"
    try:
        ref = core.parse_secret_ref(spec, option="--secret")
    except core.ConfigurationError as exc:
        raise UsageError(str(exc).removeprefix("servicebus: ")) from None
    notebook = self.shell.user_ns.get("dbutils") if self.shell is not None else None
    try:
        return core.read_secret(ref, dbutils=lambda: notebook, option="--secret")
    except core.ConfigurationError as exc:
        raise UsageError(str(exc)) from None
