"""%sb_peek and %sb_browse: look at messages without locking them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ... import core
from ...core import DEAD_LETTER_QUEUE
from ..widgets import browser
from .command import COUNT, command, parser, whole
from .targets import shown, with_dlq
from .times import add_window, said, window_of, within

if TYPE_CHECKING:
    from .state import MagicsState

PEEK = parser(
    "sb_peek",
    "Look at messages without locking them or raising delivery counts. Returns a DataFrame.",
    "  %sb_peek orders\n"
    "  df = %sb_peek orders -n 500 --json\n"
    "  %sb_peek orders --from-sequence-number 101     # the next page\n"
    "  %sb_peek orders --dlq --where 'dead_letter_reason == \"MaxDeliveryCountExceeded\"'\n"
    '  %sb_peek orders --where \'body_json.customer.id == "c-7" and props.priority == "high"\'\n'
    "  %sb_peek sessions --session-id s-1\n"
    "  %sb_peek orders --enqueued-after 2026-11-25T14:00 --enqueued-before 2026-11-25T15:00\n"
    "  %sb_peek orders --dlq --enqueued-after 2h       # what dead-lettered messages were enqueued in the last 2 hours",
)
PEEK.add_argument("entity", help=f"queue, topic/subscriptions/name, or either with /{DEAD_LETTER_QUEUE}")
PEEK.add_argument(
    "-n",
    "--max-messages",
    type=COUNT,
    dest="max_messages",
    help="at most this many (default: SbMagics.peek_max_messages)",
)
PEEK.add_argument("--from-sequence-number", type=whole(0), default=1, help="first sequence number")
PEEK.add_argument("--dlq", action="store_true", help="peek the entity's dead-letter queue")
PEEK.add_argument("--session-id", help="peek one session")
PEEK.add_argument("--where", help="search expression over properties and body fields (body_json.a.b, props.p)")
PEEK.add_argument(
    "--max-scanned", type=COUNT, default=core.MAX_SCANNED, help="with --where: look through at most this many messages"
)
PEEK.add_argument("--json", action="store_true", help="decode JSON bodies into body_json.* columns")
add_window(PEEK)
PEEK.rename("--session", "--session-id")
PEEK.rename("--from-seq", "--from-sequence-number")
PEEK.rename("--scan", "--max-scanned")

BROWSE = parser(
    "sb_browse",
    "The message browser: page by sequence number, search bodies and properties, inspect, export.",
    "  %sb_browse orders\n  %sb_browse orders --dlq --page-size 100",
)
BROWSE.add_argument("entity")
BROWSE.add_argument("--dlq", action="store_true", help="browse the dead-letter queue")
BROWSE.add_argument("--page-size", type=COUNT, default=browser.ROWS_A_PAGE, help="messages per page")
BROWSE.rename("-n", "--page-size")  # -n is at most N messages wherever it is (docs/names.md)


@command(PEEK)
def sb_peek(self: MagicsState, args: argparse.Namespace) -> Any:
    entity = with_dlq(args.entity, args.dlq)
    count = args.max_messages if args.max_messages is not None else self.peek_max_messages
    window = window_of(args)
    found = core.peek(
        entity,
        from_sequence_number=args.from_sequence_number,
        max_messages=count,
        where=args.where,
        max_scanned=args.max_scanned,
        session_id=args.session_id,
        connection=self.conn(),
        **within(window),
    )
    summarise_page(shown(self, entity) + said(window), found, args.max_scanned)
    frame = core.to_dataframe(found.records)
    return core.json_columns(frame) if args.json else frame


@command(BROWSE)
def sb_browse(self: MagicsState, args: argparse.Namespace) -> Any:
    from ..widgets import MessageBrowser

    return MessageBrowser(
        args.address,
        dlq=args.dlq,
        page_size=args.page_size,
        connection=self.connection if self.connection is not None else self.conn(),
        connections=self.connections,
    )


def summarise_page(entity: str, found: core.PeekPage, max_scanned: int) -> None:
    records, searched = found.records, found.where is not None
    text = f"{len(records)} of {found.scanned} scanned messages matched" if searched else f"{len(records)} messages"
    text += f" from {entity}"
    if records:
        text += f" (sequence numbers {records[0]['sequence_number']}..{records[-1]['sequence_number']})"
    if searched and found.scanned >= max_scanned:
        text += f"; stopped at --max-scanned {max_scanned}"
    if found.scanned and found.next_sequence_number > found.from_sequence_number:
        text += f"; next page: --from-sequence-number {found.next_sequence_number}"
    print(text + ".")
    if found.unevaluated_text:
        print(f"Note: {found.unevaluated_text}; they are not matches.")
    hint = found.hint()
    if hint:
        print(hint)
