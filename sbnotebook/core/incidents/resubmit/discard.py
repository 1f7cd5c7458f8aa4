"""Discarding: the selected messages removed for good, nothing else (``%sb_discard``, the triage
panel's discard).

A discard is a resubmit without a copy (``api.py``), with its guarantees: the selection (``where``,
a time window) is found by peeking first, so a search that raised on every message fails before
anything is locked; each selected message is received with a peek-lock and completed, so a failure
midway leaves the rest where they were (run again, it finishes what is left); a whole group is
taken, however large. Service Bus receives in order and cannot skip to a sequence number, so the
messages before the last selected one that are not selected are locked while the run passes them
and given back at its end (released: no delivery counted, as for a resubmit); the Report counts them
``skipped``, and its ``discarded`` count is what the broker lost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...connections.registry import ConnectionLike, live
from ...connections.syncforms import sync_form
from ...defaults import MAX_IN_FLIGHT
from ...entities import EntityPath
from ...operations.window import When, enqueued_window
from ...outcome import Outcome, Report
from ...renames import renamed
from ...tracing import operation
from ...views.search import as_where
from .run import BATCH_SIZE, check_limit, moved

Record = dict[str, Any]


@renamed(limit="max_messages")
async def adiscard(
    source: str | EntityPath,
    *,
    where: str | Callable[[Record], bool] | None = None,
    max_messages: int | None = None,
    progress: Callable[[Report], None] | None = None,
    enqueued_after: When | None = None,
    enqueued_before: When | None = None,
    max_in_flight: int = MAX_IN_FLIGHT,
    on_outcome: Callable[[Outcome], None] | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Remove the selected messages for good (complete them): all active ones, or those ``where`` (a
    search expression or a function of a record) and ``enqueued_after`` / ``enqueued_before`` (a
    datetime, ISO 8601 or an age such as ``2h``) select, at most ``max_messages``. Others are released
    untouched, with no delivery counted, as in ``resubmit``. A search that raised on every message
    removes nothing and fails (``WhereFailed``). Destructive: the notebook layers ask first.
    ``on_outcome(outcome)``: each outcome as it is known (from the connection's thread), past the
    Report's detail limit too (a playbook's audit)."""
    src = EntityPath.parse(source)
    check_limit(max_messages, max_in_flight, BATCH_SIZE)
    matches = as_where(where)
    window = enqueued_window(enqueued_after, enqueued_before)
    conn = live(connection)
    with operation("discard", conn, src) as span:
        report = await moved(
            conn,
            src,
            None,
            where=matches,
            window=window,
            edit=None,
            limit=max_messages,
            keep_message_id=False,
            max_in_flight=max_in_flight,
            batch_size=BATCH_SIZE,
            progress=progress,
            on_outcome=on_outcome,
        )
        span.report(report)
    return report


discard = sync_form(adiscard)
