"""Dead-letter triage at any size: how many messages per dead-letter reason, error description,
subject and signature (reason and description with their variable parts masked: ``signatures.py``),
counted page by page over the one scanner (:func:`scan.scan`), never holding the messages.

A dead-letter queue after a night of a broken consumer holds hundreds of thousands of messages.
Loading them into a DataFrame to group them costs minutes and gigabytes; counting them costs one
counter per distinct value. :func:`group_counts` counts every field of ``GROUP_FIELDS`` in one
scan, calls ``progress`` after each page (messages scanned of the total, rate), stops when
``cancel`` is set or the cell is interrupted (the counts so far are kept in ``into``), and keeps
at most ``max_groups`` distinct values per field (the rest are counted under ``OTHER``, said once
in the log and in ``notes``), so memory stays flat whatever the number of messages.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..connections.registry import ConnectionLike, live
from ..entities import EntityPath
from ..errors import InvalidInputError
from ..renames import renamed
from ..times import Timed
from ..views.signatures import signature
from .counts import counts
from .scan import scan
from .window import When, enqueued_window, scan_window

SIGNATURE = "signature"  # not a record field: computed from the reason and the description
GROUP_FIELDS: tuple[str, ...] = ("dead_letter_reason", "dead_letter_error_description", "subject", SIGNATURE)
"""What ``group_counts`` can group dead-lettered messages by (its ``by``): three record fields and the
``signature`` (the reason and description with their variable parts masked)."""
MAX_GROUPS = 1_000  # distinct values kept per field: error descriptions can be unique per message
NONE = "(none)"  # the group of messages without the field
OTHER = "(other values)"
"""The group (``core.GROUP_OTHER``) a field's messages are counted under once it has ``max_groups``
distinct values."""
TABLE_COLUMNS = ("messages", "oldest", "newest", "example_description", "first_sequence_number")

log = logging.getLogger(__name__)


def group_value(record: dict[str, Any], by: str) -> str:
    """The group a record falls in when counted by ``by`` (a field of ``GROUP_FIELDS``)."""
    value = signature(record) if by == SIGNATURE else record.get(by)
    return NONE if value is None or value == "" else str(value)


@dataclass
class Group:
    """One value of one field: how many messages have it, their enqueue-time span, and the first
    one's sequence number (where a scan for the group's messages can start)."""

    value: str
    messages: int = 0
    oldest: dt.datetime | None = None
    newest: dt.datetime | None = None
    first_sequence_number: int | None = None
    example_description: str | None = None

    def add(self, record: dict[str, Any]) -> None:
        self.messages += 1
        at = record.get("enqueued_time")
        if at is not None:
            self.oldest = at if self.oldest is None or at < self.oldest else self.oldest
            self.newest = at if self.newest is None or at > self.newest else self.newest
        if self.first_sequence_number is None:
            self.first_sequence_number = record.get("sequence_number")
            self.example_description = record.get("dead_letter_error_description")


@dataclass
class GroupCounts(Timed):
    """Counts per value of each field in ``by``, built incrementally (see the module docstring)."""

    entity: str
    total: int | None = None  # the entity's message count when the grouping started (runtime properties)
    by: tuple[str, ...] = GROUP_FIELDS
    max_groups: int = MAX_GROUPS
    scanned: int = 0
    groups: dict[str, dict[str, Group]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    cancelled: bool = False  # stopped before the end (cancel, interrupt or error): the counts are partial
    max_messages: int | None = None  # counted at most this many (group_counts'): "done" is the first ones only

    def __post_init__(self) -> None:
        unknown = [b for b in self.by if b not in GROUP_FIELDS]
        if unknown or not self.by:
            raise InvalidInputError(f"Group by one or more of {', '.join(GROUP_FIELDS)}, not {unknown or 'nothing'}.")
        for name in self.by:
            self.groups.setdefault(name, {})

    @classmethod
    def of(cls, records: Iterable[dict[str, Any]], entity: str = "", by: tuple[str, ...] = GROUP_FIELDS) -> GroupCounts:
        """The counts of records already in hand (a peeked page): complete for what they are."""
        out = cls(entity, by=by)
        out.add(records)
        out.finish()
        out.total = out.scanned
        return out

    # ------------------------------------------------------------ building

    def add(self, records: Iterable[dict[str, Any]]) -> None:
        for record in records:
            self.scanned += 1
            for name in self.by:
                key = group_value(record, name)
                groups = self.groups[name]
                group = groups.get(key)
                if group is None:
                    if len(groups) >= self.max_groups:
                        key = OTHER
                        self._overflowed(name)
                    group = groups.setdefault(key, Group(key))
                group.add(record)

    def _overflowed(self, name: str) -> None:
        note = f"{name}: more than {self.max_groups} distinct values; the rest are counted under {OTHER!r}"
        if note not in self.notes:
            self.notes.append(note)
            log.info("grouping %s: %s", self.entity, note)

    def finish(self, *, cancelled: bool = False) -> None:
        self.finished = time.monotonic()
        self.cancelled = cancelled

    # ------------------------------------------------------------- reading

    @property
    def done(self) -> bool:
        """Every message was counted (not stopped early)."""
        return self.finished is not None and not self.cancelled

    @property
    def running(self) -> bool:
        return self.finished is None

    @property
    def rate(self) -> float:
        """Messages scanned per second."""
        return self.per_second(self.scanned)

    def counts(self, by: str = "dead_letter_reason") -> dict[str, int]:
        """{value: messages}, most frequent first."""
        return {g.value: g.messages for g in self.table(by)}

    def table(self, by: str = "dead_letter_reason") -> list[Group]:
        """The groups of one field, most frequent first (ties in the order they were first seen)."""
        if by not in self.groups:
            raise InvalidInputError(f"This grouping counted {', '.join(self.by)}, not {by!r}.")
        return sorted(self.groups[by].values(), key=lambda g: -g.messages)

    def to_pandas(self, by: str = "dead_letter_reason") -> Any:
        """One row per group: ``by``, messages, oldest, newest, example_description, first_sequence_number."""
        import pandas as pd

        rows = [{by: g.value, **{c: getattr(g, c) for c in TABLE_COLUMNS}} for g in self.table(by)]
        frame = pd.DataFrame(rows, columns=[by, *TABLE_COLUMNS])
        for col in ("oldest", "newest"):
            frame[col] = pd.to_datetime(frame[col], utc=True)
        frame["messages"] = frame["messages"].astype("int64")  # also when there is no row
        frame["first_sequence_number"] = frame["first_sequence_number"].astype("Int64")
        return frame

    def progress_text(self) -> str:
        """'120,000 of 1,000,000 messages scanned (12 %), 45,000 msg/s' (or 'done', 'stopped')."""
        of = f" of {self.total:,}" if self.total is not None else ""
        share = f" ({min(100, 100 * self.scanned // self.total)} %)" if self.total else ""
        state = "" if self.running else (", stopped: partial counts" if self.cancelled else ", done")
        more = self.total is None or self.scanned < self.total
        if (
            not self.running
            and not self.cancelled
            and self.max_messages is not None
            and self.scanned >= self.max_messages
            and more
        ):
            state = f", done: the first {self.scanned:,} only (max_messages)"  # more may be there: not "done" with all
        return f"{self.scanned:,}{of} messages scanned{share}, {self.rate:,.0f} msg/s in {self.elapsed:.1f} s{state}"

    def __repr__(self) -> str:
        return f"<GroupCounts {self.entity}: {self.progress_text()}>"


@renamed(limit="max_messages")
def group_counts(
    entity: str | EntityPath,
    *,
    by: Iterable[str] = GROUP_FIELDS,
    total: int | None = None,
    progress: Callable[[GroupCounts], None] | None = None,
    cancel: threading.Event | None = None,
    into: GroupCounts | None = None,
    max_groups: int = MAX_GROUPS,
    max_messages: int | None = None,
    enqueued_after: When | None = None,
    enqueued_before: When | None = None,
    connection: ConnectionLike = None,
) -> GroupCounts:
    """Count the messages of ``entity`` (a dead-letter queue, or any queue or subscription) by each
    field of ``by``, over the scanner: peeks, no locks, nothing held but the counters.

    ``total``: the message count to show progress against (default: read from the runtime
    properties, one round trip). ``progress(counts)`` is called after each page. Setting ``cancel``
    stops the scan after the page in flight; so does an interrupted cell (KeyboardInterrupt is
    raised again, the partial counts are in ``into`` when one was given). ``max_messages``: count at most
    that many messages (the first ones), and call that done. ``enqueued_after`` / ``enqueued_before``:
    only messages enqueued within that window (found by bisection, window.py); the total is then
    what the window held, known once counted."""
    path = EntityPath.parse(entity)
    conn = live(connection)
    out = into if into is not None else GroupCounts(str(path), by=tuple(by), max_groups=max_groups)
    out.max_messages = max_messages
    window = enqueued_window(enqueued_after, enqueued_before)
    if window is None:
        pages = scan(path, max_messages=max_messages, connection=conn)
    else:
        pages = scan_window(path, window, max_messages=max_messages, connection=conn)
    stopped = True
    try:
        if out.total is None and window is None:
            out.total = total if total is not None else _total(path, conn)
        for page in pages:
            out.add(page)
            if progress is not None:
                progress(out)
            if cancel is not None and cancel.is_set():
                break
        else:
            stopped = False
            if window is not None and max_messages is None:
                out.total = out.scanned  # the window's messages, every one counted
    finally:
        pages.close()  # stops the windows still in flight
        out.finish(cancelled=stopped)
    return out


def _total(path: EntityPath, conn: Any) -> int:
    """How many messages a scan of ``path`` will meet, from the runtime properties (one round trip)."""
    c = counts(path.parent, connection=conn)
    if path.sub_queue == "dead_letter":
        return c.dead_letter
    if path.sub_queue == "transfer_dead_letter":
        return c.transfer_dead_letter
    return c.active + c.scheduled
