"""A purge of a time window (``purge(enqueued_after=, enqueued_before=)``), and the removals by
sequence number every purge shares (deferred messages received and deleted, scheduled ones cancelled).

Only messages enqueued within the window are removed. Their sequence numbers are found by a search over peeks
(window.py) and peeked, each kept by its own time. Then, by kind:

- active messages, with no start to the window (``enqueued_before`` only): deleted on the server
  (``batch-delete-messages`` with the window's end as its cut-off: what it deletes is exactly what
  was enqueued before it, no body crosses the network, nothing is locked);
- active messages of a window with a start: batch delete cannot select by a start, so they are
  received with a peek-lock and completed when enqueued within the window (a discard,
  resubmit/discard.py): Service Bus receives in order, so the messages before the window are locked while
  the purge passes them and given back at its end (released: no delivery counted), and that costs a
  receive of every message before the window's last;
- deferred ones received by sequence number and deleted; scheduled ones cancelled.

What the window still holds at the end (locked by another receiver, ...) is counted as ``left``,
by peeking only the window's numbers.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import replace
from typing import Any

from ...connections.links import opened, receiver_for
from ...connections.live import LiveConnection
from ...defaults import MAX_IN_FLIGHT
from ...entities import EntityPath
from ...operations.bounds import TimeWindow
from ...operations.messages import message_id
from ...operations.scan import message_state
from ...operations.window import Span, ascan_span, locate
from ...outcome import Outcome, Report
from ...sdk.api import ServiceBusReceiveMode
from ..leftovers import what_purge_left
from ..resubmit.run import BATCH_SIZE, moved
from .on_server import delete_on_server

BY_SEQUENCE = 100  # sequence numbers per receive-deferred / cancel-scheduled request


async def delete_deferred(
    client: Any, path: EntityPath, numbers: list[int], report: Report, tick: Callable[[], None]
) -> None:
    """Deferred messages received by sequence number (receive-and-delete): gone, one outcome each."""
    rcv = receiver_for(client, path, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE)
    async with opened(rcv):
        for k in range(0, len(numbers), BY_SEQUENCE):
            got = await rcv.receive_deferred_messages(numbers[k : k + BY_SEQUENCE])
            report.extend(Outcome(message_id(m), int(m.sequence_number or 0), "purged") for m in got)
            tick()


async def cancel_scheduled(
    conn: LiveConnection, path: EntityPath, scheduled: list[int], report: Report, tick: Callable[[], None]
) -> None:
    """Scheduled messages are cancelled on the queue or topic (a subscription or DLQ has none)."""
    if not scheduled or path.is_subscription or path.is_dead_letter:
        return
    for k in range(0, len(scheduled), BY_SEQUENCE):
        chunk = scheduled[k : k + BY_SEQUENCE]

        async def cancel(sender: Any, chunk: list[int] = chunk) -> None:
            await sender.cancel_scheduled_messages(chunk)

        await conn.with_link("sender", path, cancel)
        report.extend(Outcome(None, s, "purged", "scheduled: cancelled") for s in chunk)
        tick()


async def _in_window(conn: LiveConnection, path: EntityPath, span: Span) -> dict[str, list[int]]:
    """The sequence numbers of the window's messages, by state, from a peek of its numbers."""
    found: dict[str, list[int]] = {"active": [], "deferred": [], "scheduled": []}
    async with aclosing(ascan_span(path, span, connection=conn)) as pages:
        async for page in pages:
            for m in page:
                found[message_state(m)].append(int(m.sequence_number))
    return found


async def _receive_active(
    conn: LiveConnection, path: EntityPath, window: TimeWindow, report: Report, tick: Callable[[], None]
) -> None:
    """The window's active messages discarded (peek-lock, complete), their outcomes as the purge's."""
    done = await moved(
        conn,
        path,
        None,
        where=None,
        window=window,
        edit=None,
        limit=None,
        keep_message_id=False,
        max_in_flight=MAX_IN_FLIGHT,
        batch_size=BATCH_SIZE,
        progress=lambda _: tick(),
    )
    kept = {"discarded": 0, "skipped": 0}
    for o in done.outcomes:
        kept[o.outcome] = kept.get(o.outcome, 0) + 1
        report.add(replace(o, outcome="purged") if o.outcome == "discarded" else o)
    for outcome, name in (("discarded", "purged"), ("skipped", "skipped")):
        if done.count(outcome) > kept[outcome]:  # counted past the detail limit
            report.add_counted(name, done.count(outcome) - kept[outcome])
    for text in done.notes:
        report.note(text)
    for text in done.errors:
        report.error(text)
    passed = done.count("skipped")
    report.note(
        "active messages of the window received with a peek-lock and completed (batch delete cannot select by a"
        f" start time): {passed} message(s) outside the window were locked while the purge passed them and given"
        " back (released: no delivery counted)"
    )


async def purge_window(
    conn: LiveConnection,
    path: EntityPath,
    window: TimeWindow,
    report: Report,
    tick: Callable[[], None],
    asked: list[str],
) -> None:
    """Remove the messages of the kinds ``asked`` (active, deferred, scheduled) enqueued within
    ``window`` (see the module docstring)."""
    since = dt.datetime.now(dt.UTC)
    report.note(f"only messages {window.describe()}")
    span = await asyncio.to_thread(locate, conn, path, window)  # blocking peeks, off the loop they wait on
    report.stats["window_peeks"] = span.peeks if span is not None else 0
    if span is None:
        return
    found = await _in_window(conn, path, span)
    received = False
    if "active" in asked and found["active"]:
        on_server = window.after is None and await delete_on_server(conn, path, report, tick, before=window.before)
        if on_server:
            report.note(
                "active messages of the window deleted on the server (batch delete, enqueued before the cut-off):"
                " none received or locked"
            )
        else:
            await _receive_active(conn, path, window, report, tick)
            received = True
    if "deferred" in asked and found["deferred"]:
        await delete_deferred(conn.sdk_client(), path, found["deferred"], report, tick)
    if "scheduled" in asked:
        await cancel_scheduled(conn, path, found["scheduled"], report, tick)
    first = span.parts()[0][0]

    def left(m: Any) -> bool:  # active ones a discard took were counted by it, if it left any
        return span.holds(m) and not (received and message_state(m) == "active")

    await what_purge_left(
        conn,
        path,
        report,
        asked=asked,
        since=since,
        match=left,
        not_asked="in the window, not asked for: left as they are",
        numbers=(first, span.last + 1),
    )
