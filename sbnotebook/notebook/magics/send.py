"""%%sb_send and %sb_compose: send a cell's messages, or compose one in the send panel."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ... import core
from ...core import InvalidInputError, SbError
from ..cells import parse_cell
from .command import add_max_in_flight, add_rate, command, parser
from .progress import Progress
from .targets import check_exists, shown
from .times import add_time

if TYPE_CHECKING:
    from .state import MagicsState

SEND = parser(
    "sb_send",
    "Send the cell's messages: JSON lines, a JSON array, or a Python expression (a list or DataFrame).\n"
    "Every send is awaited; at most --max-in-flight operations are outstanding. Invalid JSON sends nothing.",
    '  %%sb_send orders\n  {"order": 1, "total": 9.5}\n  {"order": 2, "total": 12}\n\n'
    "  %%sb_send results --max-in-flight 32\n  results_df\n\n"
    '  %%sb_send orders --schedule-at +10m\n  [{"body": {"order": 3}, "subject": "reminder"}]',
)
SEND.add_argument("entity", help="queue or topic")
add_max_in_flight(SEND)
add_rate(SEND)
add_time(SEND, "--schedule-at", "schedule the messages for WHEN", future=True)
SEND.add_argument("--format", choices=["auto", "json", "jsonl", "python"], default="auto")
SEND.add_argument(
    "--one-per-send", action="store_true", help="one message per send operation (default: as many as fit)"
)
SEND.rename("--schedule", "--schedule-at")  # core.send's schedule_at
SEND.rename("--no-batch", "--one-per-send")  # a batch is a locked batch (%sb_settle --batch; docs/names.md)

COMPOSE = parser(
    "sb_compose",
    "The send panel: compose a message (body, content type, subject, properties, schedule) and send it.",
    "  %sb_compose orders",
)
COMPOSE.add_argument("entity")


@command(SEND, cell=True)
def sb_send(self: MagicsState, args: argparse.Namespace, cell: str) -> Any:
    user_ns = self.shell.user_ns if self.shell is not None else {}
    try:
        messages = parse_cell(cell, user_ns, args.format)
    except SbError:
        raise
    except Exception as exc:  # the cell's Python expression failed
        raise InvalidInputError(f"The cell's expression failed: {type(exc).__name__}: {exc}") from None
    progress = Progress(shown(self, args.entity))
    kwargs: dict[str, Any] = {
        "max_in_flight": self.max_in_flight if args.max_in_flight is None else args.max_in_flight,
        "one_per_send": args.one_per_send,
        "rate": args.rate,
        "progress": progress.update,
        "connection": self.conn(),
    }
    if args.schedule_at:
        kwargs["schedule_at"] = args.schedule_at  # checked as the line was read; +2h from the send
    report = core.send(args.entity, messages, **kwargs)
    progress.finish(report)
    return report


@command(COMPOSE)
def sb_compose(self: MagicsState, args: argparse.Namespace) -> Any:
    from ..widgets import SendPanel

    check_exists(args.entity, self.conn())
    default = self.connection if self.connection is not None else self.conn()
    return SendPanel(args.address, connection=default, max_in_flight=self.max_in_flight, connections=self.connections)
