"""What a resubmit's or discard's ``where`` selects, found by peeking when the run begins
(core/incidents/resubmit.py checks each message it receives against it)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from ..connections.live import LiveConnection
from ..entities import EntityPath
from ..operations.scan import ascan
from ..views.records import to_record

Record = dict[str, Any]


@dataclass
class Selection:
    """What ``where`` selected when the run began, found by peeking: how many, and the highest
    sequence number among them. Each received message is checked with ``where`` again; a message
    past the highest, or once all were found, ends the run (nothing beyond it gets locked)."""

    where: Callable[[Record], bool]
    count: int
    last: int
    found: int = 0

    def done(self) -> bool:
        return self.found >= self.count

    def takes(self, src: EntityPath, m: Any) -> bool:
        """Whether the run was asked to take this message (received, or peeked at the end)."""
        return int(m.sequence_number or 0) <= self.last and self.where(to_record(m, str(src)))


async def peeked_selection(
    conn: LiveConnection, src: EntityPath, where: Callable[[Record], bool], limit: int | None
) -> Selection:
    """How many messages the filter selects (the first ``limit``) and the highest sequence number
    among them, found by peeking (no locks, no delivery counts). Two numbers, whatever the size of
    the entity."""
    count = last = 0
    async with aclosing(ascan(src, connection=conn)) as pages:
        async for page in pages:
            for m in page:
                if where(to_record(m, str(src))):
                    count += 1
                    last = max(last, int(m.sequence_number or 0))
                    if count == limit:
                        return Selection(where, count, last)
    return Selection(where, count, last)
