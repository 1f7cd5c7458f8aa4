"""What each read partition does, per mode. Runs on executors; every client is opened here."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from ..core import (
    PAGE_SIZE,
    Connection,
    EntityPath,
    SbError,
    TimeWindow,
    is_session_locked,
    live_connection,
    operation_span,
    receive,
    scan,
    snapshot,
    time_bounds,
)
from .schema import to_arrow


@dataclass(frozen=True)
class PeekRange:
    """Sequence numbers first..last (inclusive), at most `limit` of them. The last range ends at the
    highest number present when the read was planned: nothing enqueued later is read."""

    index: int
    first: int
    last: int
    limit: int | None
    window: TimeWindow | None = None  # enqueuedAfter / enqueuedBefore: rows outside are left out
    scheduled_only: bool = False  # the sweep below a window: only messages that were scheduled

    def keeps(self, record: dict[str, Any]) -> bool:
        if self.scheduled_only and record.get("scheduled_enqueue_time") is None:
            return False
        return self.window is None or self.window.holds(record.get("enqueued_time"))


@dataclass(frozen=True)
class SessionGroup:
    """A partition's sessions, read one after another; in `peek` at most `limit` messages in all,
    in `receive-and-delete` at most `count`."""

    index: int
    sessions: tuple[str, ...]
    limit: int | None


@dataclass(frozen=True)
class Share:
    """A destructive read's share: at most `count` messages."""

    index: int
    count: int


log = logging.getLogger(__name__)


def plan_peek(
    conn: Connection,
    path: EntityPath,
    start: int,
    partitions: int,
    max_messages: int | None,
    window: TimeWindow | None = None,
    stop: int | None = None,
) -> list[PeekRange]:
    """Sequence-number ranges for a snapshot read: first..last present at planning (see
    :func:`snapshot`), split evenly, none above `stop` (a pushed-down ``sequence_number <=``). Holes
    in the numbering only make some ranges hold fewer. With a time window, the numbers that hold it,
    found by a search over peeks (:func:`time_bounds`), and a last range for scheduled messages below it when
    the entity has any."""
    if window is not None and window.empty:
        return []
    found = snapshot(conn, path, start)
    if found is not None and stop is not None:
        found = (found[0], min(found[1], stop)) if found[0] <= stop else None
    if found is None:
        return []
    if window is None or not window.bounded:
        return peek_ranges(found[0], found[1], partitions, max_messages)
    bounds = time_bounds(conn, path, found[0], found[1], window)
    log.info("servicebus peek of %s: time window found in %d peeks: %s", path, bounds.peeks if bounds else 0, bounds)
    if bounds is None:
        return []
    ranges = peek_ranges(bounds.first, bounds.last, partitions, max_messages) if bounds.first <= bounds.last else []
    ranges = [replace(r, window=window) for r in ranges]
    if bounds.sweep is not None:
        log.info(
            "servicebus peek of %s: the entity holds scheduled messages; sequence numbers %d..%d are peeked "
            "for those enqueued within the window",
            path,
            *bounds.sweep,
        )
        sweep = PeekRange(len(ranges), bounds.sweep[0], bounds.sweep[1], None, window, scheduled_only=True)
        ranges = limited([*ranges, sweep], max_messages)  # the sweep takes its share of maxMessages too
    return ranges


def peek_ranges(first: int, last: int, partitions: int, max_messages: int | None) -> list[PeekRange]:
    span = last - first + 1
    n = max(1, min(partitions, span, max_messages or span))  # no range without a message to take
    width = math.ceil(span / n)
    out = []
    for i in range(n):
        lo = first + i * width
        if lo > last:
            break
        out.append(PeekRange(i, lo, min(last, lo + width - 1), None))
    return limited(out, max_messages)


def limited(ranges: list[PeekRange], max_messages: int | None) -> list[PeekRange]:
    """The ranges with shares of `max_messages` that add up to it (a range whose share is 0 is
    dropped): maxMessages is at most that many in all, not per range rounded up."""
    if not max_messages or not ranges:
        return ranges
    base, extra = divmod(max_messages, len(ranges))
    kept = [replace(r, limit=base + (1 if i < extra else 0)) for i, r in enumerate(ranges)]
    return [replace(r, index=i) for i, r in enumerate(r for r in kept if r.limit)]


def shares(total: int, partitions: int) -> list[Share]:
    n = max(1, min(partitions, total))
    base, extra = divmod(total, n)
    return [Share(i, base + (1 if i < extra else 0)) for i in range(n)]


def session_groups(sessions: list[str], partitions: int, limit: int | None) -> list[SessionGroup]:
    """Sessions dealt round-robin to at most `partitions` partitions, each with its share of `limit`."""
    n = max(1, min(partitions, len(sessions), limit or len(sessions)))  # each group takes one at least
    counts = [s.count for s in shares(limit, n)] if limit else [None] * n  # adding up to limit, not more
    return [SessionGroup(i, tuple(sessions[i::n]), counts[i]) for i in range(n) if sessions[i::n]]


def read_peek(conn: Connection, path: EntityPath, part: PeekRange, schema: Any, in_flight: int) -> Iterator[Any]:
    """The range through the scanner, ``in_flight`` peeks at once: one partition is then no longer
    bound by round trips (docs/benchmarks.md: at 50 ms, 20,000 messages in 1.3 s, not 3.1 s)."""
    filtered = part.window is not None or part.scheduled_only
    # A filtered range counts its limit in rows kept, not in messages peeked (a sweep peeks many
    # messages that were not scheduled before it finds one that was).
    pages = scan(
        path,
        from_sequence_number=part.first,
        before_sequence_number=part.last + 1,
        max_messages=None if filtered else part.limit,
        max_in_flight=in_flight,
        connection=conn,
    )
    left = part.limit
    try:
        for records in pages:
            if filtered:
                records = [r for r in records if part.keeps(r)][:left]
                if left is not None:
                    left -= len(records)
            yield to_arrow(records, schema)
            if left == 0:
                break
    finally:
        pages.close()  # stops the peeks read ahead


def read_session_peek(
    conn: Connection, path: EntityPath, part: SessionGroup, start: int, schema: Any, window: TimeWindow | None = None
) -> Iterator[Any]:
    """Peek each session in turn. Peeking a session needs its lock (Service Bus peeks a session only
    through a receiver that holds it): the lock is taken for that session's peeks and given back as
    soon as they are done, before the next session is taken. Nothing is received or counted."""
    left = part.limit
    for session in part.sessions:
        # With a window the limit counts rows kept, not messages peeked.
        most = left if window is None else None
        pages = scan(
            path, from_sequence_number=start, max_messages=most, session_id=session, max_in_flight=1, connection=conn
        )
        try:
            for records in pages:
                if window is not None:  # a session is peeked whole: no bisection through its lock
                    records = [r for r in records if window.holds(r.get("enqueued_time"))][:left]
                if left is not None:
                    left -= len(records)
                yield to_arrow(records, schema)
                if left is not None and left <= 0:
                    break
        except SbError as exc:
            raise _session_error(exc, path, session) from None
        finally:
            pages.close()  # closes the session receiver: the lock goes back now, not at the lock's expiry
        if left is not None and left <= 0:
            return


def _session_error(exc: SbError, path: EntityPath, session: str) -> SbError:
    if is_session_locked(exc):
        return type(exc)(
            f"servicebus: session {session!r} of {path} is locked by another receiver, and reading a session "
            "needs its lock for a moment: retry when it is free, or leave it out with the sessionIds option."
        )
    return exc


def read_and_delete(
    conn: Connection, path: EntityPath, part: Share, wait: float, schema: Any, session: str | None = None
) -> Iterator[Any]:
    """At-most-once: each message is removed from Service Bus as it is delivered. No prefetch: a
    receiver never takes more than this partition returns."""
    left = part.count
    first = True
    while left > 0:
        try:
            batch = receive(
                path,
                max_messages=min(PAGE_SIZE, left),
                mode="receive_and_delete",
                wait_seconds=wait if first else 1.0,
                session_id=session,
                connection=conn,
            )
        except SbError as exc:
            raise exc if session is None else _session_error(exc, path, session) from None
        first = False
        if not len(batch):
            return
        left -= len(batch)
        yield to_arrow(batch.records, schema)


def read_sessions_and_delete(
    conn: Connection, path: EntityPath, part: SessionGroup, wait: float, schema: Any
) -> Iterator[Any]:
    """Receive-and-delete session by session, at most `part.limit` messages in all: each receive holds
    its session only while it takes messages."""
    left = part.limit or 0
    for session in part.sessions:
        for batch in read_and_delete(conn, path, Share(part.index, left), wait, schema, session):
            left -= batch.num_rows
            yield batch
        if left <= 0:
            return


def read_and_defer(
    conn: Connection, path: EntityPath, part: Share, wait: float, max_in_flight: int, schema: Any
) -> Iterator[Any]:
    """Peek-lock, then defer: only rows whose deferral succeeded are returned, each with its
    sequence number, so `settle()` can fetch them later from anywhere."""
    left = part.count
    first = True
    while left > 0:
        with receive(
            path,
            max_messages=min(1000, left),
            wait_seconds=wait if first else 1.0,
            max_in_flight=max_in_flight,
            connection=conn,
        ) as batch:
            if not len(batch):
                return
            records = batch.records
            deferred = {o.index for o in batch.defer() if o.outcome == "deferred"}
        first = False
        left -= len(records)
        kept = []
        for i, record in enumerate(records):
            if i in deferred:
                record.update(state="deferred", lock_token=None, locked_until=None)
                kept.append(record)
        if kept:
            yield to_arrow(kept, schema)


def traced(name: str, options: Any, batches: Iterator[Any]) -> Iterator[Any]:
    """``batches`` (Arrow record batches) inside one ``sbnotebook.<name>`` span of this process
    (``read``, ``stream``): the entity, the namespace, how many rows, the outcome. On an executor it
    reaches the tracer provider of that Python worker (docs/tracing.md)."""
    conn = live_connection(options.conn())
    with operation_span(name, conn, options.entity) as span:
        rows = 0
        try:
            for batch in batches:
                rows += int(getattr(batch, "num_rows", 0))
                yield batch
        except GeneratorExit:  # Spark took what it needed (a limit): not a failure
            span.outcome("stopped")
            return
        finally:
            span.count(rows)
        span.outcome("ok")
