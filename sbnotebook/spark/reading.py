"""What each read partition does, per mode. Runs on executors; every client is opened here."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..core import (
    PAGE_SIZE,
    Connection,
    EntityPath,
    SbError,
    counts,
    is_session_locked,
    live_connection,
    peek_numbers,
    receive,
    scan,
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


# Messages peeked at the expected end of the entity when a read is planned. A short window has seen
# the end; a full one (producers faster than a round trip, or holes in the numbering) falls back to
# a search. 32 messages cover a producer sending 640 messages a second at 50 ms per round trip.
BOUND_WINDOW = 32
GALLOP_STEP = 1024  # the first step of the search for the end when there is no count to guess from

log = logging.getLogger(__name__)


def first_present(conn: Connection, path: EntityPath, start: int) -> int | None:
    """The lowest sequence number present from `start` on: one peek of one message."""
    got = peek_numbers(path, start=max(start, 1), count=1, connection=conn)
    return got[0] if got else None


def snapshot(conn: Connection, path: EntityPath, start: int) -> tuple[int, int] | None:
    """The lowest and highest sequence numbers present from `start` on, now: the bounds of a snapshot.

    Sequence numbers only grow (per queue or topic), so every message enqueued after this returns
    has a higher number than the second one, and every message present before it was called has a
    number at most that. Costs two round trips when the numbering is dense: the count (administration
    API) and the first number (a peek) at once, then one peek of ``BOUND_WINDOW`` messages where the
    count says the end is. Without the count (no Manage rights) the end is searched, logged once."""
    # The count and the first number are independent: ask both at once, the round trips overlap.
    with ThreadPoolExecutor(max_workers=2) as pool:
        counting = pool.submit(message_count, conn, path)
        first_found = pool.submit(first_present, conn, path, start)
        count, first = counting.result(), first_found.result()
    if first is None:
        return None
    if count is None:
        live_connection(conn).info_once(
            "spark-bounds",
            "servicebus: no message count for %s (no Manage rights?): finding the end by peeks (more round trips)",
            path,
        )
    return first, last_present(conn, path, first, count)


def last_present(conn: Connection, path: EntityPath, first: int, count: int | None) -> int:
    """The highest sequence number present now; `first` is a number present, `count` how many
    messages the entity holds (None: unknown). With the count, one peek of ``BOUND_WINDOW`` messages
    at first + count - 1, where a densely numbered entity ends: fewer than a window back means the
    end was seen. Otherwise (the end is below the guess: holes, or messages taken meanwhile; or a
    full window: producers, or more holes) the end is searched by one-message peeks, O(log n)."""
    if count is None:
        return _search(conn, path, first, None, GALLOP_STEP)
    guess = first + max(count, 1) - 1
    window = peek_numbers(path, start=guess, count=BOUND_WINDOW, connection=conn)
    if window and len(window) < BOUND_WINDOW:
        return window[-1]
    why = "no message at or after it" if not window else "a full window after it"
    log.info("servicebus: the end of %s is not at %d (%s): searching for it", path, guess, why)
    return _search(conn, path, first, guess, 0) if not window else _search(conn, path, window[-1], None, BOUND_WINDOW)


def _search(conn: Connection, path: EntityPath, low: int, high: int | None, step: int) -> int:
    """The highest number present, with a message at `low` and none at or after `high` (None: gallop
    up from `low` by `step`, doubling, to find such a `high`), by bisection. A message that arrives
    during the search may be taken in (its number is above every one present before); none that
    arrives after it: the result is a number that was present."""
    if high is None:
        while (found := first_present(conn, path, low + step)) is not None:
            low, step = found, step * 2
        high = low + step
    while high - low > 1:
        mid = (low + high) // 2
        found = first_present(conn, path, mid)
        if found is None:
            high = mid
        else:
            low = found  # at or past `high` only if it arrived during the search: then it is the end
    return low


def plan_peek(
    conn: Connection, path: EntityPath, start: int, partitions: int, max_messages: int | None
) -> list[PeekRange]:
    """Sequence-number ranges for a snapshot read: first..last present at planning (see
    :func:`snapshot`), split evenly. Holes in the numbering only make some ranges hold fewer."""
    found = snapshot(conn, path, start)
    return [] if found is None else peek_ranges(found[0], found[1], partitions, max_messages)


def message_count(conn: Connection, path: EntityPath) -> int | None:
    """How many messages the entity (or its dead-letter queue) holds, or None without admin rights."""
    try:
        c = counts(path, connection=conn)
    except SbError:
        return None
    if path.is_dead_letter:
        return c.dead_letter if path.sub_queue == "dead_letter" else c.transfer_dead_letter
    return c.total - c.dead_letter - c.transfer_dead_letter


def peek_ranges(first: int, last: int, partitions: int, max_messages: int | None) -> list[PeekRange]:
    span = last - first + 1
    n = max(1, min(partitions, span))
    width = math.ceil(span / n)
    limit = math.ceil(max_messages / n) if max_messages else None
    out = []
    for i in range(n):
        lo = first + i * width
        if lo > last:
            break
        out.append(PeekRange(i, lo, min(last, lo + width - 1), limit))
    return out


def shares(total: int, partitions: int) -> list[Share]:
    n = max(1, min(partitions, total))
    base, extra = divmod(total, n)
    return [Share(i, base + (1 if i < extra else 0)) for i in range(n)]


def session_groups(sessions: list[str], partitions: int, limit: int | None) -> list[SessionGroup]:
    """Sessions dealt round-robin to at most `partitions` partitions, each with its share of `limit`."""
    n = max(1, min(partitions, len(sessions)))
    share = math.ceil(limit / n) if limit else None
    return [SessionGroup(i, tuple(sessions[i::n]), share) for i in range(n) if sessions[i::n]]


def read_peek(conn: Connection, path: EntityPath, part: PeekRange, schema: Any, in_flight: int) -> Iterator[Any]:
    """The range through the scanner, ``in_flight`` peeks at once: one partition is then no longer
    bound by round trips (docs/benchmarks.md: at 50 ms, 20,000 messages in 1.3 s, not 3.1 s)."""
    pages = scan(path, start=part.first, stop=part.last + 1, limit=part.limit, concurrency=in_flight, connection=conn)
    for records in pages:
        yield to_arrow(records, schema)


def read_session_peek(conn: Connection, path: EntityPath, part: SessionGroup, start: int, schema: Any) -> Iterator[Any]:
    """Peek each session in turn. Peeking a session needs its lock (Service Bus peeks a session only
    through a receiver that holds it): the lock is taken for that session's peeks and given back as
    soon as they are done, before the next session is taken. Nothing is received or counted."""
    left = part.limit
    for session in part.sessions:
        pages = scan(path, start=start, limit=left, session_id=session, concurrency=1, connection=conn)
        try:
            for records in pages:
                if left is not None:
                    left -= len(records)
                yield to_arrow(records, schema)
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
                count=min(PAGE_SIZE, left),
                mode="receive-and-delete",
                wait=wait if first else 1.0,
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
            path, count=min(1000, left), wait=wait if first else 1.0, max_in_flight=max_in_flight, connection=conn
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
