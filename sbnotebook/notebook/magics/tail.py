"""%sb_tail: the messages arriving in an entity, as they arrive (``core.tail``: peeks only)."""

from __future__ import annotations

import argparse
import html
from collections import deque
from typing import TYPE_CHECKING, Any

from IPython.display import display

from ... import core
from ...core import DEAD_LETTER_QUEUE, Tail
from ..widgets.grid import BASE_COLUMNS, BODY_COLUMN, DEAD_LETTER_COLUMNS, Column, body_preview
from .command import command, parser, seconds, whole
from .targets import shown, with_dlq

if TYPE_CHECKING:
    from .state import MagicsState

TAIL = parser(
    "sb_tail",
    "Show messages as they arrive, by peeking from the last sequence number seen: nothing is locked, "
    "removed or counted, so consumers get every message as if nobody watched. Messages already there "
    "are not shown unless --from-sequence-number asks. In a notebook a live table with a rate line, in a "
    "terminal one line per message; a kernel interrupt (or --seconds) stops it, and it returns what it showed "
    "as a DataFrame. Polls every SbMagics.tail_interval seconds.",
    "  %sb_tail orders\n"
    "  df = %sb_tail orders --seconds 60\n"
    "  %sb_tail orders --dlq --where 'dead_letter_reason == \"MaxDeliveryCountExceeded\"'\n"
    "  %sb_tail events/subscriptions/audit --from-sequence-number 1200\n"
    "  %sb_tail prod:orders --panel",
)
TAIL.add_argument("entity", help=f"queue, topic/subscriptions/name, or either with /{DEAD_LETTER_QUEUE}")
TAIL.add_argument("--dlq", action="store_true", help="the entity's dead-letter queue")
TAIL.add_argument("--seconds", type=seconds(zero=False), help="stop after this many seconds (default: at an interrupt)")
TAIL.add_argument("--where", help="show only messages matching this search expression")
TAIL.add_argument("--from-sequence-number", type=whole(0), help="show messages from this sequence number on, too")
TAIL.add_argument("--panel", action="store_true", help="a panel that tails in the background (Stop button)")
TAIL.rename("--from-seq", "--from-sequence-number")
ROWS = 20  # the live table shows the last ROWS messages


@command(TAIL)
def sb_tail(self: MagicsState, args: argparse.Namespace) -> Any:
    entity = with_dlq(args.entity, args.dlq)
    options = {"where": args.where, "from_sequence_number": args.from_sequence_number, "connection": self.conn()}
    if args.panel:
        from ..widgets.tail import TailPanel

        return TailPanel(entity, interval=self.tail_interval, seconds=args.seconds, **options)
    tail = core.tail(entity, interval=self.tail_interval, seconds=args.seconds, **options)
    tail.entity = shown(self, tail.entity)  # its lines say prod:orders on a named connection (parsed already)
    view: LiveTable | Lines = LiveTable(tail) if _html_frontend(self.shell) else Lines(tail)
    why = "time is up"
    try:
        for records in tail:
            view.add(records)
    except KeyboardInterrupt:
        why = "interrupted"
    finally:
        tail.stop()
    view.finish(why)
    if tail.matcher is not None:
        tail.matcher.check()  # the search raised on every message that came: a mistake, not a quiet tail
    return tail.to_pandas()


def _html_frontend(shell: Any) -> bool:
    """A kernel (Jupyter, VS Code, Databricks) draws HTML and updates a display in place; a terminal
    IPython prints each update again, so there a line per message is what reads well."""
    return shell is not None and getattr(shell, "kernel", None) is not None


def columns_for(tail: Tail) -> list[Column]:
    dead = tail.path.is_dead_letter
    return [*BASE_COLUMNS, *(DEAD_LETTER_COLUMNS if dead else []), BODY_COLUMN]


class LiveTable:
    """The last ``ROWS`` messages and the rate line, one display updated in place."""

    def __init__(self, tail: Tail) -> None:
        self.tail = tail
        self.rows: deque[dict[str, Any]] = deque(maxlen=ROWS)
        self.columns = columns_for(tail)
        self.handle = display(self._bundle("Waiting for messages"), raw=True, display_id=True)

    def add(self, records: list[dict[str, Any]]) -> None:
        self.rows.extend(records)
        self.handle.update(self._bundle("Interrupt the kernel to stop"), raw=True)

    def finish(self, why: str) -> None:
        self.handle.update(self._bundle(f"Ended ({why})"), raw=True)

    def _bundle(self, state: str) -> dict[str, str]:
        line = f"{state}: {self.tail.status()}."
        head = "".join(f"<th>{html.escape(name)}</th>" for name, _ in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(fill(r)))}</td>" for _, fill in self.columns) + "</tr>"
            for r in self.rows
        )
        table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>" if self.rows else ""
        return {"text/plain": line, "text/html": f"<p>{html.escape(line)}</p>{table}"}


class Lines:
    """A terminal: one line per message as it arrives, the rate at the end."""

    def __init__(self, tail: Tail) -> None:
        self.tail = tail
        print(f"Tailing {tail.entity} from sequence number {tail.next_sequence_number} (Ctrl-C to stop).")

    def add(self, records: list[dict[str, Any]]) -> None:
        for r in records:
            at = r.get("enqueued_time")
            when = at.strftime("%H:%M:%S.%f")[:-3] if at is not None else "-"
            subject = f" [{r['subject']}]" if r.get("subject") else ""
            reason = f" {r['dead_letter_reason']}:" if r.get("dead_letter_reason") else ""
            print(f"#{r.get('sequence_number')} {when}{subject}{reason} {body_preview(r)}", flush=True)

    def finish(self, why: str) -> None:
        print(f"Ended ({why}): {self.tail.status()}.")
