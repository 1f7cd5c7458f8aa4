"""What each read partition does, per mode. Runs on executors; every client is opened here."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..core import Connection, EntityPath, receive, to_record
from ..core.clients import receiver
from .schema import to_arrow

PAGE = 250  # the SDK's peek page


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


def _first_at_or_after(rcv: Any, sequence_number: int) -> int | None:
    got = rcv.peek_messages(max_message_count=1, sequence_number=sequence_number)
    return int(got[0].sequence_number) if got else None


def bounds(conn: Connection, path: EntityPath, start: int) -> tuple[int, int] | None:
    """The lowest and highest sequence numbers present from `start` on, in O(log n) one-message
    peeks (galloping, then bisection): no message is read in bulk on the driver."""
    with conn.client(retry_total=2) as client, receiver(client, path) as rcv:
        first = _first_at_or_after(rcv, max(start, 1))
        if first is None:
            return None
        known, step = first, 1024
        while (found := _first_at_or_after(rcv, known + step)) is not None:
            known, step = found, step * 2
        low, high = known, known + step  # a message at `low`, none at or after `high`
        while high - low > 1:
            mid = (low + high) // 2
            found = _first_at_or_after(rcv, mid)
            if found is None:
                high = mid
            else:
                low = found
        return first, low


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
    entity = str(path)
    taken = 0
    with conn.client(retry_total=3) as client, receiver(client, path) as rcv:
        start = part.first
        while start <= part.last and (part.limit is None or taken < part.limit):
            want = PAGE if part.limit is None else min(PAGE, part.limit - taken)
            page = rcv.peek_messages(max_message_count=want, sequence_number=start)
            records = [to_record(m, entity) for m in page if m.sequence_number <= part.last]
            if records:
                taken += len(records)
                yield to_arrow(records, schema)
            if len(records) < len(page) or not page:
                return
            start = int(page[-1].sequence_number) + 1


def read_and_delete(conn: Connection, path: EntityPath, part: Share, wait: float, schema: Any) -> Iterator[Any]:
    """At-most-once: each message is removed from Service Bus as it is delivered."""
    from azure.servicebus import ServiceBusReceiveMode

    entity = str(path)
    left = part.count
    with (
        conn.client(retry_total=3) as client,
        receiver(
            client, path, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, prefetch_count=min(PAGE, left)
        ) as rcv,
    ):
        waited = False
        while left > 0:
            got = rcv.receive_messages(max_message_count=min(PAGE, left), max_wait_time=1.0 if waited else wait)
            waited = True
            if not got:
                return
            left -= len(got)
            yield to_arrow([to_record(m, entity) for m in got], schema)


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
            outcomes = batch.defer()
        first = False
        left -= len(records)
        kept = []
        for record, outcome in zip(records, outcomes, strict=True):
            if outcome.status == "done":
                record.update(state="deferred", lock_token=None, locked_until=None)
                kept.append(record)
        if kept:
            yield to_arrow(kept, schema)
