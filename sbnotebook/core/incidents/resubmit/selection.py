"""What a resubmit's or discard's ``where`` and time window select, found by peeking when the run
begins (core/incidents/resubmit/workers.py checks each message it receives against it). With a window, only
the sequence numbers holding it are peeked (window.py: found by a search over peeks)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from ...connections.live import LiveConnection
from ...entities import EntityPath
from ...operations.bounds import TimeWindow
from ...operations.scan import ascan
from ...operations.window import ascan_span, enqueued_at, locate
from ...views.records import to_record
from ...views.where import Where

Record = dict[str, Any]


@dataclass
class Selection:
    """What ``where`` selected when the run began, found by peeking: how many, and the highest
    sequence number among them. Each received message is checked with ``where`` again; a message
    past the highest, or once all were found, ends the run (nothing beyond it gets locked)."""

    where: Callable[[Record], bool] | None
    count: int
    last: int
    found: int = 0
    window: TimeWindow | None = None
    first: int = 0  # the lowest sequence number selected (0: none)
    # What the where could not evaluate when the selection was made (a Report's stats and note).
    unevaluated: dict[str, Any] = field(default_factory=dict)
    unevaluated_text: str | None = None

    def done(self) -> bool:
        return self.found >= self.count

    def takes(self, src: EntityPath, m: Any) -> bool:
        """Whether the run was asked to take this message (received, or peeked at the end)."""
        if int(m.sequence_number or 0) > self.last:
            return False
        if self.window is not None and not self.window.holds(enqueued_at(m)):
            return False
        return self.where is None or self.where(to_record(m, str(src)))


async def _peeked(conn: LiveConnection, src: EntityPath, window: TimeWindow | None) -> AsyncGenerator[list[Any], None]:
    """The messages to select from: every one, or those of the window (its numbers found by a search)."""
    if window is None:
        async with aclosing(ascan(src, connection=conn)) as pages:
            async for page in pages:
                yield page
        return
    span = await asyncio.to_thread(locate, conn, src, window)  # blocking peeks, off the loop they wait on
    if span is None:
        return
    async with aclosing(ascan_span(src, span, connection=conn)) as pages:
        async for page in pages:
            yield page


async def peeked_selection(
    conn: LiveConnection,
    src: EntityPath,
    where: Callable[[Record], bool] | None,
    limit: int | None,
    window: TimeWindow | None = None,
) -> Selection:
    """How many messages the filter and window select (the first ``limit``) and the lowest and
    highest sequence numbers among them, found by peeking (no locks, no delivery counts), whatever
    the size of the entity. A search that raised on every message peeked fails here (``WhereFailed``),
    before anything is locked."""
    out = Selection(where, 0, 0, window=window)
    async with aclosing(_peeked(conn, src, window)) as pages:
        async for page in pages:
            for m in page:
                if where is None or where(to_record(m, str(src))):
                    seq = int(m.sequence_number or 0)
                    out.count += 1
                    out.last, out.first = max(out.last, seq), min(out.first or seq, seq)
                    if out.count == limit:
                        break
            if out.count == limit:
                break
    if isinstance(where, Where):
        where.check()
        out.unevaluated, out.unevaluated_text = where.stats(), where.describe()
    return out
