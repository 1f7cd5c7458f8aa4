"""Sending, scheduling and cancelling scheduled messages: the public forms.

``send``/``asend`` hand the input to the send pipeline (``pipeline.py``: batches, at most
``max_in_flight`` outstanding, retries, one outcome per message; the input as messages is
``messages.py``); ``schedule`` and ``cancel_scheduled`` are one management request per chunk. The
async forms hold the bodies; the sync forms are thin calls on the live connection.
"""

from __future__ import annotations

import datetime as dt
import operator
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..connections.live import LiveConnection
from ..connections.registry import ConnectionLike, live
from ..connections.syncforms import sync_form
from ..defaults import MAX_IN_FLIGHT, check_max_in_flight
from ..entities import EntityPath
from ..errors import InvalidInputError
from ..outcome import MAX_DETAILS, Outcome, Report
from ..rates import Rate, parse_rate
from ..renames import renamed
from ..sdk.failures import from_sdk
from ..times import When
from ..tracing import operation
from .messages import as_datetime, iter_input, message_id, to_message
from .pipeline import RetryPolicy, send_all

CANCEL_CHUNK = 100  # sequence numbers per cancel-scheduled request


# A send's batch was the one word for two ideas; a batch is a locked batch now (docs/names.md).
SEND_RENAMED: dict[str, Any] = {"batch": ("one_per_send", operator.not_)}


@renamed(**SEND_RENAMED)
async def asend(
    entity: str | EntityPath,
    messages: Any,
    *,
    max_in_flight: int = MAX_IN_FLIGHT,
    rate: Rate | None = None,
    one_per_send: bool = False,
    retry: RetryPolicy | None = None,
    progress: Callable[[Report], None] | None = None,
    schedule_at: When | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Send ``messages`` (str, bytes, dicts, records, a DataFrame, any iterable) to a queue or topic
    and wait for every outcome: one per message (see the module docstring). At most
    ``max_in_flight`` operations at once; each operation sends as many messages as fit under the
    entity's size limit (``one_per_send=True``: one message each); retryable failures retried by
    ``retry``; ``rate`` (``50/s``, ``3000/m``: ``core.parse_rate``): at most that many messages per
    second, each operation at most the rate's burst (``core/rates.py``). ``progress(report)`` is
    called after each operation, ``on_outcome(outcome)`` with each outcome as it is known (both from
    the connection's thread), also past the Report's detail limit: for work that follows every
    message (a resumable import's progress marker)."""
    path = EntityPath.parse(entity)
    check_max_in_flight(max_in_flight)
    per_second = parse_rate(rate)
    conn = live(connection)
    coro = send_all(
        conn,
        path,
        messages,
        max_in_flight=max_in_flight,
        batch=not one_per_send,
        retry=retry or RetryPolicy(),
        progress=progress,
        schedule_at=None if schedule_at is None else as_datetime(schedule_at, "schedule_at"),
        on_outcome=on_outcome,
        rate=per_second,
    )
    with operation("send" if schedule_at is None else "schedule", conn, path) as span:
        report = await conn.call(coro)
        span.report(report)
    return report


send = sync_form(asend)


async def _schedule(conn: LiveConnection, path: EntityPath, items: list[Any], when: dt.datetime) -> Report:
    # Every sequence number kept (the caller cancels by them): the messages are held here already.
    report = Report("schedule", str(path), max_details=max(MAX_DETAILS, len(items)))
    started = time.perf_counter()

    async def op(sender: Any) -> list[int]:
        return list(await sender.schedule_messages(items, when))

    with operation("schedule", conn, path) as span:
        seqs = await conn.call_on(path, conn.with_link("sender", path, op))
        span.count(len(seqs))
    for i, (msg, seq) in enumerate(zip(items, seqs, strict=True)):
        report.add(Outcome(message_id(msg), int(seq), "scheduled", None, i))
    report.elapsed = time.perf_counter() - started
    return report


@renamed(at="schedule_at")
async def aschedule(
    entity: str | EntityPath, messages: Any, schedule_at: When, *, connection: ConnectionLike = None
) -> Report:
    """Schedule messages to become active at ``schedule_at`` (as ``send(..., schedule_at=)``). The
    report holds each message's sequence number (``[o.sequence_number for o in report]``), which
    ``cancel_scheduled`` takes."""
    path = EntityPath.parse(entity)
    when = as_datetime(schedule_at, "schedule_at")
    items = [to_message(m) for m in iter_input(messages)]
    conn = live(connection)
    return await conn.call(_schedule(conn, path, items, when))


schedule = sync_form(aschedule)


async def _cancel(
    conn: LiveConnection, path: EntityPath, seqs: list[int], progress: Callable[[Report], None] | None = None
) -> Report:
    report = Report("cancel-scheduled", str(path))
    started = time.perf_counter()
    for start in range(0, len(seqs), CANCEL_CHUNK):
        chunk = seqs[start : start + CANCEL_CHUNK]

        async def op(sender: Any, chunk: list[int] = chunk) -> None:
            await sender.cancel_scheduled_messages(chunk)

        try:
            await conn.with_link("sender", path, op)
        except Exception as exc:
            error = from_sdk(exc, entity=str(path))
            report.extend(
                Outcome(None, s, "failed", error.message, condition=error.condition, tracking_id=error.tracking_id)
                for s in chunk
            )
        else:
            report.extend(Outcome(None, s, "cancelled") for s in chunk)
        if progress is not None:
            progress(report)
    report.elapsed = time.perf_counter() - started
    return report


def _seqs(sequence_numbers: Iterable[int]) -> list[int]:
    seqs = list(sequence_numbers)
    if not all(isinstance(s, int) and s > 0 for s in seqs):
        raise InvalidInputError("Sequence numbers are positive whole numbers.")
    return seqs


async def acancel_scheduled(
    entity: str | EntityPath,
    sequence_numbers: Iterable[int],
    *,
    progress: Callable[[Report], None] | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Cancel scheduled messages by sequence number (as ``schedule`` reported them), in requests
    of ``CANCEL_CHUNK``; ``progress(report)`` after each. One outcome per number."""
    path = EntityPath.parse(entity)
    seqs = _seqs(sequence_numbers)
    conn = live(connection)
    return await conn.call(_cancel(conn, path, seqs, progress))


cancel_scheduled = sync_form(acancel_scheduled)
