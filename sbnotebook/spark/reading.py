"""What each read partition does, per mode. Runs on executors; every client is opened here."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..core import PAGE_SIZE, Connection, EntityPath, SbError, counts, receive, scan, scan_records
from .schema import to_arrow


@dataclass(frozen=True)
class PeekRange:
    """Sequence numbers first..last (inclusive) of a snapshot, at most `limit` of them."""

    index: int
    first: int
    last: int
    limit: int | None


@dataclass(frozen=True)
class Share:
    """A destructive read's share: at most `count` messages."""

    index: int
    count: int


def bounds(conn: Connection, path: EntityPath, start: int, count: int | None = None) -> tuple[int, int] | None:
    """The lowest and highest sequence numbers present from `start` on, in one-message peeks on the
    driver's live connection: no message is read in bulk. With the entity's message ``count`` (from
    the administration API) the last number is guessed as first + count - 1 and confirmed in two
    more peeks when the numbering is dense; otherwise galloping, then bisection, in O(log n)."""

    def first_at_or_after(seq: int) -> int | None:
        got = scan_records(path, start=seq, limit=1, page_size=1, connection=conn)
        return int(got[0]["sequence_number"]) if got else None

    first = first_at_or_after(max(start, 1))
    if first is None:
        return None
    known, step = first, 1024
    if count and count > 1:
        guess = first_at_or_after(first + count - 1)
        if guess is not None:
            known, step = guess, 1  # most likely the last one: confirm with the next number
        else:
            step = count - 1  # the last is below the guess: bisect between first and it
    while (found := first_at_or_after(known + step)) is not None:
        known, step = found, step * 2
    low, high = known, known + step  # a message at `low`, none at or after `high`
    while high - low > 1:
        mid = (low + high) // 2
        found = first_at_or_after(mid)
        if found is None:
            high = mid
        else:
            low = found
    return first, low


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


def read_peek(conn: Connection, path: EntityPath, part: PeekRange, schema: Any) -> Iterator[Any]:
    for records in scan(path, start=part.first, stop=part.last + 1, limit=part.limit, concurrency=2, connection=conn):
        yield to_arrow(records, schema)


def read_and_delete(conn: Connection, path: EntityPath, part: Share, wait: float, schema: Any) -> Iterator[Any]:
    """At-most-once: each message is removed from Service Bus as it is delivered. No prefetch: a
    receiver never takes more than this partition returns."""
    left = part.count
    first = True
    while left > 0:
        batch = receive(
            path, count=min(PAGE_SIZE, left), mode="receive-and-delete", wait=wait if first else 1.0, connection=conn
        )
        first = False
        if not len(batch):
            return
        left -= len(batch)
        yield to_arrow(batch.records, schema)


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
