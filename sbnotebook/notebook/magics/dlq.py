"""%sb_dlq: dead-letter triage (the panel, or counts per reason, description, subject or signature)."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from ... import core
from ...core import GROUP_FIELDS, EntityPath, GroupCounts, LiveConnection, TimeWindow, deprecated
from .command import COUNT, command, parser
from .progress import Progress
from .times import add_window, said, window_of, within

if TYPE_CHECKING:
    from .state import MagicsState

# What --by took before it said the record's field, as core.group_counts(by=) does: kept for one
# release (docs/names.md), each says once what replaced it.
OLD_BY = {"reason": "dead_letter_reason", "description": "dead_letter_error_description"}


def _by(text: str) -> str:
    """A field of ``core.GROUP_FIELDS``; an old word is taken as its field, with a warning."""
    if text in OLD_BY:
        deprecated(f"%sb_dlq --by {text}", f"--by {OLD_BY[text]}")
        return OLD_BY[text]
    return text


def words(by: str) -> str:
    """How a line says a field: ``dead_letter_error_description`` -> ``error description``."""
    return by.removeprefix("dead_letter_").replace("_", " ")


DLQ = parser(
    "sb_dlq",
    "Triage a dead-letter queue: the triage panel with widgets (it opens on the counts and the first page), "
    "else every dead-lettered message counted by reason (or --by dead_letter_error_description / subject / "
    "signature: the record's fields, as core.group_counts(by=) names them), nothing "
    "kept but the counts; a kernel interrupt stops counting and shows the counts so far. A signature is the "
    "reason and description with their variable parts masked (numbers, GUIDs, ids, times, quoted values, "
    "e-mail addresses, URL segments): select its messages with --where 'signature == \"...\"'.",
    "  %sb_dlq orders\n  %sb_dlq orders --count\n  %sb_dlq orders --summary --by signature\n"
    "  %sb_dlq orders --summary --by dead_letter_error_description\n"
    "  %sb_dlq events/subscriptions/audit --summary --by subject\n"
    "  %sb_dlq orders --summary --enqueued-after 2h    # only messages enqueued in the last 2 hours",
)
DLQ.add_argument("entity", help="the entity whose dead-letter queue to look at")
DLQ.add_argument("--summary", action="store_true", help="the counts table, not the panel")
DLQ.add_argument(
    "--by",
    type=_by,
    choices=GROUP_FIELDS,
    default="dead_letter_reason",
    help="the field the summary groups by (default: dead_letter_reason)",
)
DLQ.add_argument("--count", action="store_true", help="the panel starts counting every message at once")
DLQ.add_argument("-n", "--max-messages", type=COUNT, help="count at most this many messages (default: all)")
add_window(DLQ)  # with a window, the counts table (the panel reads the whole queue)


@command(DLQ)
def sb_dlq(self: MagicsState, args: argparse.Namespace) -> Any:
    path = EntityPath.parse(args.entity).parent
    window = window_of(args)
    if not args.summary and window is None:
        panel = triage_panel(str(path), self.conn())
        if panel is not None:
            panel.by.value = args.by
            if args.count:
                panel.count()
            return panel
    return summary(path, self.conn(), args.by, args.max_messages, self.bound_name, window)


def summary(
    path: EntityPath,
    conn: LiveConnection,
    by: str,
    limit: int | None,
    name: str | None = None,
    window: TimeWindow | None = None,
) -> Any:
    """Count the dead-letter queue by ``by`` (a field of ``core.GROUP_FIELDS``) with a live
    progress line; an interrupt shows the partial counts. ``name``: the named connection the entity
    belongs to (its lines say NAME:ENTITY), None for the default one."""
    prefix = f"{name}:" if name else ""
    dlq = str(path.dead_letter)
    counting = GroupCounts(dlq, by=(by,))  # only what is shown: a signature costs a masking
    line = Progress(prefix + dlq, total=None)

    def progress(c: GroupCounts) -> None:
        if time.monotonic() - line.last < 0.3:
            return
        line.last, line.total = time.monotonic(), c.total
        line.show(c.scanned, f"Counting {prefix}{dlq}: {c.progress_text()}")

    interrupted = False
    try:
        core.group_counts(dlq, into=counting, progress=progress, max_messages=limit, connection=conn, **within(window))
    except KeyboardInterrupt:
        interrupted = True
        print(f"Interrupted: partial counts of the first {counting.scanned:,} messages.")
    line.show(counting.scanned, f"{prefix}{dlq}: {counting.progress_text()}")
    for note in counting.notes:
        print(f"Note: {note}")
    table = counting.to_pandas(by)
    print(counted_line(counting, prefix + str(path) + said(window), words(by), interrupted))
    return table


def counted_line(counting: GroupCounts, path: str, by: str, interrupted: bool) -> str:
    """The last line says how many were counted of how many: a limit or an interrupt leaves the rest
    uncounted, and the line must not read as the size of the dead-letter queue."""
    total = counting.total
    if total is not None and counting.scanned < total:
        why = "interrupted" if interrupted else "--max-messages" if counting.max_messages is not None else "stopped"
        return (
            f"The first {counting.scanned:,} of {total:,} dead-lettered messages in {path} by {by} "
            f"({why}: the rest were not counted)."
        )
    if interrupted:
        return f"{counting.scanned:,} dead-lettered messages in {path} by {by} (interrupted: more may be there)."
    return f"{counting.scanned:,} dead-lettered messages in {path} by {by}."


def triage_panel(entity: str, connection: LiveConnection) -> Any:
    """The dead-letter triage panel when ipywidgets is there; None otherwise (the summary is shown)."""
    try:
        from ..widgets import TriagePanel
    except ImportError:
        return None
    return TriagePanel(entity, connection=connection)
