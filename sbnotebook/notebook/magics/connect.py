"""%sb_connect: choose the namespace and open the one live connection every command uses."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ... import core
from .command import command, parser

if TYPE_CHECKING:
    from .state import MagicsState

CONNECT = parser(
    "sb_connect",
    "Choose the Service Bus namespace. With nothing configured, use the embedded emulator.",
    "  %sb_connect                                   # env settings, else the embedded emulator\n"
    "  %sb_connect $conn_str                         # a connection string held in a variable\n"
    "  %sb_connect --namespace contoso.servicebus.windows.net   # Entra ID (DefaultAzureCredential)\n"
    "  %sb_connect --namespace NS --credential databricks:my-sb-credential  # a Unity Catalog service credential\n"
    "  %sb_connect --secret my-scope/servicebus      # Databricks secret scope\n"
    "  %sb_connect --emulator                        # the embedded emulator, whatever is configured",
)
CONNECT.add_argument("connection", nargs="?", help="a connection string (never echoed)")
CONNECT.add_argument("--namespace", help="fully qualified namespace, signed in with DefaultAzureCredential")
CONNECT.add_argument(
    "--credential",
    metavar="REF",
    help="with --namespace: sign in with databricks:NAME (a Unity Catalog service credential) or "
    "callable:package.module:function (returns an azure-core TokenCredential)",
)
CONNECT.add_argument("--secret", metavar="SCOPE/KEY", help="read the connection string from a Databricks secret")
CONNECT.add_argument("--emulator", action="store_true", help="use the embedded emulator")


@command(CONNECT)
def sb_connect(self: MagicsState, args: argparse.Namespace) -> None:
    chosen = [x for x in (args.connection, args.namespace, args.secret) if x] + ([True] if args.emulator else [])
    if len(chosen) > 1:
        raise UsageError("%sb_connect: give one of CONNECTION, --namespace, --secret or --emulator.")
    if args.credential and not args.namespace:
        raise UsageError("%sb_connect: --credential goes with --namespace (a connection string carries its own key).")
    if args.emulator:
        self.connection = core.connect(core.resolve(env={}))  # nothing configured: the embedded emulator
    elif args.secret:
        self.connection = core.connect(databricks_secret(self, args.secret))
    elif args.namespace and args.credential:
        self.connection = core.connect(namespace=args.namespace, credential=named_credential(self, args.credential))
    elif args.connection or args.namespace:
        self.connection = core.connect(args.connection, namespace=args.namespace)
    elif self.connection is None:
        self.connection = core.connect()
    print(f"Connected to {self.connection.settings}.")


def named_credential(self: MagicsState, ref: str) -> Any:
    """The token credential a reference names, made here; dbutils is the notebook's, where it has one."""
    dbutils = self.shell.user_ns.get("dbutils") if self.shell is not None else None
    return core.credential_of(core.parse_credential_ref(ref), dbutils=dbutils)


def databricks_secret(self: MagicsState, spec: str) -> str:
    scope, _, key = spec.partition("/")
    if not scope or not key:
        raise UsageError("--secret takes SCOPE/KEY, for example --secret my-scope/servicebus.")
    dbutils = self.shell.user_ns.get("dbutils") if self.shell is not None else None
    if dbutils is None:
        raise UsageError("--secret reads a Databricks secret scope, but dbutils is not available here.")
    try:
        value = dbutils.secrets.get(scope=scope, key=key)
    except Exception as exc:
        raise UsageError(f"Cannot read secret {scope}/{key}: {type(exc).__name__}.") from None
    return str(value)
