"""``sbnotebook topology export``: a namespace's queues, topics, subscriptions and rules written as
Microsoft's emulator Config.json (``core.export_topology``), for ``sbnotebook emulator --config``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any


class ExportParser(argparse.ArgumentParser):
    """The export's parser. An old flag (``renamed``, docs/names.md) is taken as its new name, and
    says once what replaced it: ``--connection`` took a connection string here, where every magic's
    ``--connection`` names a named connection."""

    renamed = {"--connection": "--connection-string"}

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        words = list(sys.argv[1:] if args is None else args)
        for i, word in enumerate(words):
            flag, eq, value = word.partition("=")
            if flag in self.renamed:  # before argparse, which would take it as an abbreviation silently
                from .core import deprecated  # the command line imports core only when it runs

                deprecated(f"sbnotebook topology export {flag}", self.renamed[flag])
                words[i] = self.renamed[flag] + eq + value
        return super().parse_known_args(words, namespace)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, parser_class=ExportParser)
    export = actions.add_parser(
        "export",
        help="write the namespace's entities and rules as Microsoft's emulator Config.json (no keys)",
        description=(
            "Read the namespace's queues, topics, subscriptions and rules through the administration API "
            "(the Manage right) and write them as Microsoft's emulator Config.json: `sbnotebook emulator "
            "--config FILE` starts an emulator with the same entities. Without --connection-string or "
            "--fully-qualified-namespace: SERVICEBUS_CONNECTION_STRING, then SERVICEBUS_FULLY_QUALIFIED_NAMESPACE."
        ),
    )
    where = export.add_mutually_exclusive_group()
    where.add_argument(
        "--connection-string",
        metavar="CONN",
        help="a connection string, or env:VARIABLE holding one (keeps the key out of argv)",
    )
    where.add_argument(
        "--fully-qualified-namespace",
        metavar="FQDN",
        help="the namespace's host name (Entra ID: --credential, or your sign-in)",
    )
    export.add_argument(
        "--credential",
        metavar="REF",
        help="with --fully-qualified-namespace: callable:package.module:function or service-credential:NAME",
    )
    export.add_argument("-o", "--output", metavar="FILE", help="where to write it (default: standard output)")
    export.add_argument("--entities", metavar="GLOB", help="queue and topic names to export: orders* or orders*,audit")


def _connection(args: argparse.Namespace) -> str | None:
    text: str | None = args.connection_string
    if text is not None and text.lower().startswith("env:"):
        name = text[4:]
        text = os.environ.get(name)
        if not text:
            raise SystemExit(f"sbnotebook topology export: the environment variable {name} is not set")
    return text


def run(args: argparse.Namespace) -> int:
    from . import core

    if args.credential is not None and args.fully_qualified_namespace is None:
        print("sbnotebook topology export: --credential goes with --fully-qualified-namespace", file=sys.stderr)
        return 2
    try:
        conn = core.connect(
            _connection(args),
            fully_qualified_namespace=args.fully_qualified_namespace,
            credential=args.credential,
            warm=False,
        )
        result = core.export_topology(args.output, entities=args.entities, connection=conn)
    except core.SbError as exc:
        print(f"sbnotebook topology export: {exc.message}", file=sys.stderr)
        return 1
    finally:
        core.close_all()
    if args.output is None:
        print(json.dumps(result.config, indent=2))
    print(result, file=sys.stderr)  # the summary and the notes: the file stays the config alone
    return 0
