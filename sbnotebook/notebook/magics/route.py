"""%sb_route and %%sb_route: which subscriptions of a topic messages would go to, by which rule, and
why not (``core.route``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import core
from ...core import EntityPath, InvalidInputError, LiveConnection, SbError
from .command import command, one_line, parser
from .targets import address
from .times import add_window, window_of, within

if TYPE_CHECKING:
    from .state import MagicsState

SHOWN = 20  # messages whose lines are printed; the DataFrame returned holds them all

ROUTE = parser(
    "sb_route",
    "For each message and each subscription of TOPIC: whether it gets the message, by which rule, the "
    "properties after the rule's action, and for a subscription that does not, the first clause that "
    "failed with the values seen. SOURCE: an entity or its dead-letter queue (with --where and the time "
    "window), a JSONL export file, or a variable holding a DataFrame of records or a list of them; or, "
    "in a cell, a message typed there (the cell its body, --properties its properties). Rules: the "
    "topic's, read through the administration API (the Manage right), or --topology FILE (Config.json as "
    "`sbnotebook topology export` writes it); --rule adds a what-if filter beside them. Returns a "
    "DataFrame, one row per message, subscription and copy.",
    "  %sb_route orders orders-audit\n"
    "  %sb_route prod:orders home:orders-audit\n"
    f"  %sb_route orders orders/subscriptions/eu/{core.DEAD_LETTER_QUEUE} --summary\n"
    "  %sb_route orders incident.jsonl --topology Config.json\n"
    '  %sb_route orders frame --rule "user.priority > 3"\n'
    '  %%sb_route orders --properties \'{"subject": "order", "region": "eu", "priority": 5}\'',
)
ROUTE.add_argument("topic", help="the topic whose subscriptions' rules are evaluated (TOPIC or NAME:TOPIC)")
ROUTE.add_argument(
    "source", nargs="?", help=f"an entity (or NAME:ENTITY), its {core.DEAD_LETTER_QUEUE}, a .jsonl file, or a variable"
)
ROUTE.add_argument("--where", help="only an entity's messages matching this search expression")
add_window(ROUTE)
ROUTE.add_argument("--topology", metavar="FILE", help="read the rules from this Config.json, not the namespace")
ROUTE.add_argument("--rule", action="append", default=[], metavar="SQL", help="a what-if SQL filter (repeatable)")
ROUTE.add_argument("--properties", metavar="JSON", help="the typed message's properties (record fields or others)")
ROUTE.add_argument(
    "--summary", action="store_true", help="counts per subscription: where these messages would go if sent"
)
ROUTE.add_argument(
    "--jsonl", metavar="FILE", help="also write every row to this JSON lines file, the properties with their types"
)


def _messages(self: MagicsState, args: argparse.Namespace, cell: str | None) -> Any:
    if args.properties is not None or cell is not None:
        if args.source is not None:
            raise InvalidInputError("A typed message (--properties, or the cell) or a SOURCE, not both.")
        try:
            given = json.loads(args.properties or "{}")
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"--properties is not JSON: {exc.msg} at position {exc.pos}.") from None
        if not isinstance(given, dict):
            raise InvalidInputError("--properties takes a JSON object of properties.")
        return core.typed_in(given, body=(cell or "").strip() or None)
    if args.source is None:
        raise InvalidInputError("Say which messages: SOURCE (an entity, a .jsonl file, a variable) or --properties.")
    user_ns = self.shell.user_ns if self.shell is not None else {}
    value = user_ns.get(args.source)
    return value if value is not None and not isinstance(value, str) else args.source


def _entity_source(self: MagicsState, messages: Any) -> tuple[Any, LiveConnection | None]:
    """SOURCE as core reads it, with the connection its messages are read through: an entity the
    default connection's, ``NAME:ENTITY`` the named one's (whatever the topic's connection is); a
    file, a variable or a typed message as it is."""
    if not isinstance(messages, str) or Path(messages).is_file():
        return messages, None
    return address(self, messages)


def route(self: MagicsState, args: argparse.Namespace, cell: str | None = None) -> Any:
    messages, source_conn = _entity_source(self, _messages(self, args, cell))
    topic, conn = address(self, args.topic)  # NAME:TOPIC: its rules read through that connection's admin API
    is_dlq = isinstance(messages, str) and "/" in messages and EntityPath.parse(messages).is_dead_letter
    result = core.route(
        topic,
        messages,
        topology=args.topology,
        extra_rules=args.rule,
        where=args.where,
        resubmitted=args.summary and is_dlq,
        explain=not args.summary,
        connection=conn,
        source_connection=source_conn,
        **within(window_of(args)),
    )
    result.topic = args.topic  # the lines name both as typed: prod:orders, not orders
    if isinstance(args.source, str) and ":" in args.source and source_conn is not None:
        result.source = args.source
    if args.summary:
        print("\n".join(result.summary_lines()))
        return None
    print("\n".join(result.lines(SHOWN)))
    if result.messages > SHOWN:
        print(f"... {result.messages - SHOWN:,} more messages: the DataFrame returned holds them all.")
    if args.jsonl is not None:
        n = result.to_jsonl(args.jsonl)
        print(f"{n:,} rows written to {args.jsonl} (the properties with their types).")
    return result.to_pandas()


def show_fan_out(source: str, topic: str, where: str | None, window: Any, conn: Any, *, edited: bool) -> None:
    """For %sb_resubmit to a topic: where the selected messages would go (``--summary``'s counts), in
    its confirmation; a namespace that refuses the rules (no Manage right) is said in one line."""
    try:
        result = core.route(
            topic, source, where=where, resubmitted=True, explain=False, connection=conn, **within(window)
        )
    except SbError as exc:
        print(f"Where the copies would go is not known: {one_line(exc)}")
        return
    print("\n".join(result.summary_lines()))
    if edited:
        print("(routed as the messages are now, before the edit)")


_line = command(ROUTE)(lambda self, args: route(self, args))
_cell = command(ROUTE, cell=True)(route)


def sb_route(self: MagicsState, line: str, cell: str | None = None) -> Any:
    return _line(self, line) if cell is None else _cell(self, line, cell)


sb_route.__doc__ = _line.__doc__
