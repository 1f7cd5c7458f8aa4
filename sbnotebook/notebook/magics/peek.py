"""%sb_peek and %sb_browse: look at messages without locking them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ... import core
from ...core import DEAD_LETTER_QUEUE
from .command import COUNT, command, parser, whole
from .targets import shown, with_dlq
from .windows import add_window, said, window_of, within

if TYPE_CHECKING:
    from .state import MagicsState

PEEK = parser(
    "sb_peek",
    "Look at messages without locking them or raising delivery counts. Returns a DataFrame.",
    "  %sb_peek orders\n"
    "  df = %sb_peek orders -n 500 --json\n"
    "  %sb_peek orders --from-seq 101                 # the next page\n"
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
PEEK.add_argument("--from-seq", type=whole(0), default=1, dest="from_seq", help="first sequence number")
PEEK.add_argument("--dlq", action="store_true", help="peek the entity's dead-letter queue")
PEEK.add_argument("--session-id", help="peek one session")
PEEK.add_argument("--where", help="search expression over properties and body fields (body_json.a.b, props.p)")
PEEK.add_argument(
    "--scan", type=COUNT, default=core.SEARCH_SCAN_LIMIT, help="with --where: look through at most this many messages"
)
PEEK.add_argument("--json", action="store_true", help="decode JSON bodies into body_json.* columns")
add_window(PEEK)
PEEK.rename("--session", "--session-id")

BROWSE = parser(
    "sb_browse",
    "The message browser: page by sequence number, search bodies and properties, inspect, export.",
    "  %sb_browse orders\n  %sb_browse orders --dlq -n 100",
)
BROWSE.add_argument("entity")
BROWSE.add_argument("--dlq", action="store_true", help="browse the dead-letter queue")
BROWSE.add_argument("-n", type=COUNT, dest="count", default=50, help="messages per page")


@command(PEEK)
def sb_peek(self: MagicsState, args: argparse.Namespace) -> Any:
    entity = with_dlq(args.entity, args.dlq)
    count = args.max_messages if args.max_messages is not None else self.peek_max_messages
    window = window_of(args)
    found = core.peek(
        entity,
        from_sequence_number=args.from_seq,
        max_messages=count,
        where=args.where,
        scan_limit=args.scan,
        session_id=args.session_id,
        connection=self.conn(),
        **within(window),
    )
    summarise_page(shown(self, entity) + said(window), found, args.scan)
    frame = core.to_dataframe(found.records)
    return core.json_columns(frame) if args.json else frame


@command(BROWSE)
def sb_browse(self: MagicsState, args: argparse.Namespace) -> Any:
    from ..widgets import MessageBrowser

    return MessageBrowser(
        args.address,
        dead_letter=args.dlq,
        page_size=args.count,
        connection=self.connection if self.connection is not None else self.conn(),
        connections=self.connections,
    )


def summarise_page(entity: str, found: core.PeekPage, scan_limit: int) -> None:
    records, searched = found.records, found.where is not None
    text = f"{len(records)} of {found.scanned} scanned messages matched" if searched else f"{len(records)} messages"
    text += f" from {entity}"
    if records:
        text += f" (sequence numbers {records[0]['sequence_number']}..{records[-1]['sequence_number']})"
    if searched and found.scanned >= scan_limit:
        text += f"; stopped at the --scan limit of {scan_limit}"
    if found.scanned and found.next_sequence_number > found.from_sequence_number:
        text += f"; next page: --from-seq {found.next_sequence_number}"
    print(text + ".")
    if found.unevaluated_text:
        print(f"Note: {found.unevaluated_text}; they are not matches.")
    hint = found.hint()
    if hint:
        print(hint)
