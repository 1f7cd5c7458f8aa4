"""%sb_topology export: the namespace's queues, topics, subscriptions and rules as Microsoft's emulator
Config.json (``core.export_topology``), on this connection or a named one (``NAME:``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ... import core
from .command import command, parser

if TYPE_CHECKING:
    from .state import MagicsState

TOPOLOGY = parser(
    "sb_topology",
    "Export the namespace's queues, topics, subscriptions and rules (filters, actions, every property\n"
    "the format has) as Microsoft's emulator Config.json, without keys: `sbnotebook emulator --config\n"
    "FILE` (or Microsoft's emulator) starts with the same entities. Says what the format or Microsoft's\n"
    "emulator cannot hold, once per kind. Needs the Manage right (the administration API).",
    "  %sb_topology export prod-topology.json\n"
    "  %sb_topology export prod: orders.json --entities 'orders*'     # the connection named prod",
)
TOPOLOGY.add_argument("action", choices=["export"], help="export: write the file")
TOPOLOGY.add_argument("where", nargs="+", metavar="[NAME:] FILE", help="a named connection (NAME:), then the file")
TOPOLOGY.add_argument("--entities", metavar="GLOB", help="queue and topic names: orders* or orders*,audit")


def _connection_and_file(self: MagicsState, where: list[str]) -> tuple[core.LiveConnection, str]:
    if len(where) == 1 and not where[0].endswith(":"):
        return self.conn(), where[0]
    if len(where) == 2 and where[0].endswith(":"):
        return self.named(where[0][:-1]), where[1]
    raise core.InvalidInputError("Give the file, after the connection's name when not this one: prod: FILE.")


@command(TOPOLOGY)
def sb_topology(self: MagicsState, args: argparse.Namespace) -> Any:
    conn, path = _connection_and_file(self, args.where)
    result = core.export_topology(path, entities=args.entities, connection=conn)
    print(result)
    return None
