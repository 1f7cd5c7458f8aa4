"""Enqueued-time windows on the commands and core functions that read or act (``enqueued_after=`` /
``enqueued_before=``, ``--enqueued-after`` / ``--enqueued-before``): WHEN read (``times.parse_time``),
the sequence numbers holding the window found by a search over peeks (``window_search.window_bounds``:
``time_bounds``, the Spark reader's ``enqueuedAfter`` / ``enqueuedBefore``), and the scan of only those
numbers.

The window is Spark's: half-open, at or after ``enqueued_after``, strictly before ``enqueued_before``.
Each message read is kept by its own enqueued time, so the edges are exact (a batch sharing the
boundary time is all in, or all out); the search only decides where to peek, so a window holding
the last 1% of an entity peeks about 1% of it plus a few rounds of 32 small peeks in flight.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass, field
from typing import Any

from ..connections.registry import ConnectionLike, live
from ..entities import EntityPath
from ..errors import InvalidInputError
from ..times import When, parse_time, utc
from ..views.records import to_record
from .bounds import TimeWindow
from .scan import ascan_range
from .window_search import window_bounds


def given_text(value: When | None) -> str | None:
    """A WHEN as given, as text: what a resumable operation's record keys on (an age resumes as typed)."""
    return None if value is None else value.isoformat() if isinstance(value, dt.datetime) else str(value)


def enqueued_window(
    enqueued_after: When | None, enqueued_before: When | None, now: dt.datetime | None = None
) -> TimeWindow | None:
    """The window ``enqueued_after <= enqueued time < enqueued_before`` (either may be None), or None
    when neither is given. Ages are taken from one ``now``."""
    if enqueued_after is None and enqueued_before is None:
        return None
    now = now or dt.datetime.now(dt.UTC)
    after = parse_time(enqueued_after, name="enqueued_after", now=now) if enqueued_after is not None else None
    before = parse_time(enqueued_before, name="enqueued_before", now=now) if enqueued_before is not None else None
    if after is not None and before is not None and not after < before:
        raise InvalidInputError(
            f"enqueued_after ({after.isoformat()}) must be before enqueued_before ({before.isoformat()})."
        )
    return TimeWindow(after, before)


def enqueued_at(m: Any) -> dt.datetime | None:
    """A record's or an SDK message's enqueued time, aware (UTC)."""
    t = m.get("enqueued_time") if isinstance(m, dict) else getattr(m, "enqueued_time_utc", None)
    return utc(t) if isinstance(t, dt.datetime) else None


def _scheduled(m: Any) -> bool:
    t = m.get("scheduled_enqueue_time") if isinstance(m, dict) else getattr(m, "scheduled_enqueue_time_utc", None)
    return t is not None


@dataclass(frozen=True)
class Span:
    """Where a window's messages are: sequence numbers ``first..last`` (each message kept by its
    time), and below them, when the entity holds scheduled messages, ``sweep``: numbers whose
    scheduled messages may be enqueued within the window (a scheduled message is numbered when it
    is scheduled). ``peeks``: what the search cost. ``head``: the SDK's messages ``first..last``, all
    of them, when the search peeked them already (a window in the entity's last page: window_search.py)."""

    window: TimeWindow
    first: int
    last: int
    sweep: tuple[int, int] | None
    peeks: int
    head: tuple[Any, ...] | None = field(default=None, repr=False)
    density: float = 1.0  # the share of the entity's numbers that hold a message

    def parts(self) -> list[tuple[int, int, bool]]:
        """(first, last, scheduled only) in sequence order: the sweep, then the window's numbers."""
        out = [(self.sweep[0], self.sweep[1], True)] if self.sweep is not None else []
        return out + ([(self.first, self.last, False)] if self.first <= self.last else [])

    def keeps(self, m: Any, scheduled_only: bool = False) -> bool:
        """Whether a record or SDK message is in the window (in the sweep: and was scheduled)."""
        return (not scheduled_only or _scheduled(m)) and self.window.holds(enqueued_at(m))

    def holds(self, m: Any) -> bool:
        """Whether a record or SDK message is in the window, wherever it was found."""
        return self.window.holds(enqueued_at(m))


def locate(connection: ConnectionLike, entity: str | EntityPath, window: TimeWindow, start: int = 1) -> Span | None:
    """The sequence numbers holding ``window`` from ``start`` on, found as the Spark reader finds
    them (``snapshot`` and ``time_bounds``, their round trips overlapped: ``window_bounds``; a few
    peeks, never a read of the entity); None when no
    message can be in it. Blocking: from a coroutine on the connection's loop, ``asyncio.to_thread``."""
    path = EntityPath.parse(entity)
    bounds = window_bounds(live(connection), path, start, window)
    if bounds is None:
        return None
    # A dead-letter queue holds no scheduled message: nothing below the window to sweep.
    sweep = None if path.is_dead_letter else bounds.sweep
    if bounds.first > bounds.last and sweep is None:
        return None
    return Span(window, bounds.first, bounds.last, sweep, bounds.peeks, bounds.head, bounds.density)


async def _apart(
    entity: str | EntityPath, span: Span, first: int, last: int, scheduled_only: bool, connection: ConnectionLike
) -> AsyncGenerator[list[Any], None]:
    """The pages of one part of ``span`` (numbers ``first..last``), as peeked: the window's own numbers
    from its ``head`` when the search peeked them already, else ``ascan_range``'s."""
    if span.head is not None and not scheduled_only:
        yield [m for m in span.head if first <= int(m.sequence_number) <= last]
        return
    pages = ascan_range(entity, first, last, connection=connection, density=span.density)
    try:
        async for page in pages:
            yield page
    finally:
        await pages.aclose()


async def ascan_span(
    entity: str | EntityPath,
    span: Span,
    *,
    from_sequence_number: int = 1,
    connection: ConnectionLike = None,
) -> AsyncGenerator[list[Any], None]:
    """Pages of the SDK messages in ``span``'s window, from ``from_sequence_number`` on, in sequence order
    (``_apart`` over each part of the span: its pages all in flight at once); pages may be empty."""
    for first, last, scheduled_only in span.parts():
        if max(first, from_sequence_number) > last:
            continue
        pages = _apart(entity, span, max(first, from_sequence_number), last, scheduled_only, connection)
        try:
            async for page in pages:
                yield [m for m in page if span.keeps(m, scheduled_only)]
        finally:
            await pages.aclose()


def span_pages(
    entity: str | EntityPath,
    span: Span,
    *,
    from_sequence_number: int = 1,
    connection: ConnectionLike = None,
) -> Generator[list[tuple[Any, dict[str, Any]]], None, None]:
    """Pages of ``span``'s window as (the SDK's message, its record) pairs (peeks, on the
    connection's loop): an export reads the message's typed values, a scan keeps the records."""
    path = EntityPath.parse(entity)
    conn = live(connection)
    for first, last, scheduled_only in span.parts():
        if max(first, from_sequence_number) > last:
            continue
        for page in conn.iterate(_apart(path, span, max(first, from_sequence_number), last, scheduled_only, conn)):
            pairs = ((m, to_record(m, str(path))) for m in page)
            yield [(m, r) for m, r in pairs if span.keeps(r, scheduled_only)]


def scan_span(
    entity: str | EntityPath,
    span: Span,
    *,
    from_sequence_number: int = 1,
    connection: ConnectionLike = None,
) -> Generator[list[dict[str, Any]], None, None]:
    """Pages of records in ``span``'s window (``span_pages``' records)."""
    for page in span_pages(entity, span, from_sequence_number=from_sequence_number, connection=connection):
        yield [record for _, record in page]


def scan_window(
    entity: str | EntityPath,
    window: TimeWindow,
    *,
    from_sequence_number: int = 1,
    max_messages: int | None = None,
    connection: ConnectionLike = None,
) -> Generator[list[dict[str, Any]], None, None]:
    """Pages of records enqueued within ``window`` (at most ``max_messages``), from ``from_sequence_number`` on: the
    window located (``locate``), then only its numbers scanned. ``close()`` stops the read-ahead."""
    conn = live(connection)
    span = locate(conn, entity, window, from_sequence_number)
    if span is None:
        return
    left = max_messages
    pages = scan_span(entity, span, from_sequence_number=from_sequence_number, connection=conn)
    try:
        for page in pages:
            if left is not None:
                page, left = page[:left], left - len(page[:left])
            if page:
                yield page
            if left == 0:
                return
    finally:
        pages.close()
