"""%sb_discard: remove exactly the messages a search and a time window select, nothing else.

Counted by peeking first (nothing locked), then asked, with what it does to the others: Service Bus
receives in order and cannot skip to a sequence number, so the active messages before the last
selected one are locked while the discard passes them and given back at its end (released: their
delivery count is not raised, but consumers cannot receive them meanwhile). Then ``core.discard``:
peek-lock, complete the selected (the same guarantees as ``%sb_resubmit``: every match however many,
a failure midway leaves the rest, the same command again finishes what is left)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import core
from ...core import DEAD_LETTER_QUEUE, EntityPath, LiveConnection, TimeWindow, Where
from .command import COUNT, command, parser
from .progress import Progress, say_interrupted
from .targets import shown, with_dlq
from .times import add_window, records, said, unevaluated, window_of, within

if TYPE_CHECKING:
    from .state import MagicsState

DISCARD = parser(
    "sb_discard",
    "Remove for good exactly the active messages --where and the window select (with neither: every\n"
    "active message), nothing else. Counts them by peeking, then asks (type 'discard') unless --yes,\n"
    "saying what happens to the others. A search that fails on every message removes nothing.",
    "  %sb_discard orders --dlq --where 'subject == \"test\"'\n"
    "  %sb_discard orders --dlq --enqueued-before 2026-11-25T14:00   # what dead-lettered before the fix\n"
    "  %sb_discard orders --enqueued-after 2h --where 'props.source == \"load-test\"' --yes\n"
    "  %sb_discard orders --dlq --enqueued-after 30m -n 100",
)
DISCARD.add_argument("entity", help=f"queue or topic/subscriptions/name, or either with /{DEAD_LETTER_QUEUE}")
DISCARD.add_argument("--dlq", action="store_true", help="discard from the entity's dead-letter queue")
DISCARD.add_argument("--where", help="only messages matching this search expression")
add_window(DISCARD)
DISCARD.add_argument("-n", "--max-messages", type=COUNT, help="at most this many (the first ones)")
DISCARD.add_argument("--max-in-flight", type=COUNT, dest="max_in_flight", help="default: SbMagics.max_in_flight")
DISCARD.add_argument("--yes", action="store_true", help="do not ask first")


@dataclass
class Selected:
    """What the discard will remove, counted by peeking: how many, and the active messages the
    entity holds (None: not counted, no Manage right)."""

    count: int
    active: int | None


def select(entity: str, where: Where | None, window: TimeWindow | None, limit: int | None, conn: Any) -> Selected:
    """Count the active messages selected (at most ``limit``), peeking only the window's numbers."""
    count = 0
    for record in records(entity, window, conn):
        if record.get("state", "active") == "active" and (where is None or where(record)):
            count += 1
            if count == limit:
                break
    return Selected(count, _active(entity, conn))


def _active(entity: str, conn: LiveConnection) -> int | None:
    path = EntityPath.parse(entity)
    try:
        c = core.counts(str(path.parent), connection=conn)
    except core.EntityNotFoundError:
        raise
    except core.SbError:
        return None  # no Manage right: the question says "the others" without a number
    if path.sub_queue == "dead_letter":
        return c.dead_letter
    return c.transfer_dead_letter if path.is_dead_letter else c.active


def _others(selected: Selected) -> str:
    """What the discard does to the messages it does not remove, in the question."""
    others = (
        "the other active messages"
        if selected.active is None
        else (f"up to {max(selected.active - selected.count, 0)} other active message(s)")
    )
    return (
        f"Nothing else is removed: Service Bus receives in order, so {others} before the last match are locked"
        " while the discard passes them and given back at its end (released: their delivery count is not raised;"
        " other consumers cannot receive them meanwhile)."
    )


@command(DISCARD)
def sb_discard(self: MagicsState, args: argparse.Namespace) -> Any:
    entity = str(with_dlq(args.entity, args.dlq))
    where = core.compile_where(args.where) if args.where else None
    window = window_of(args)
    conn = self.conn()
    selected = select(entity, where, window, args.max_messages, conn)
    unevaluated(where)  # a search that raised on every message fails the cell here: nothing removed
    what = " matching --where" if where is not None else ""
    if not selected.count:
        print(f"Nothing to discard in {shown(self, entity)}{what}{said(window)}: nothing removed.")
        return None
    print(f"Discard {selected.count} active message(s) of {shown(self, entity)}{what}{said(window)}.")
    if not args.yes:
        self.ask(f"{_others(selected)} Discarded messages are gone for good.", "discard")
    progress = Progress(shown(self, entity), "Discarding from", "discarded", total=selected.count)
    report = core.discard(
        entity,
        where=args.where,  # compiled afresh: the Report counts what the discard's own peek could not evaluate
        max_messages=selected.count,  # what was counted and confirmed: not what arrived since
        max_in_flight=self.max_in_flight if args.max_in_flight is None else args.max_in_flight,
        progress=progress.update,
        connection=conn,
        **within(window),
    )
    progress.finish(report)
    say_interrupted(report, "the same command again discards what is left")
    return report
