"""One page of messages for a magic or a panel, with or without a search, read through ``core.scan``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import core
from ..core.live import ConnectionLike

Record = dict[str, Any]


@dataclass
class Found:
    """What a page read found: the records, how many were looked at, and where the next page starts."""

    start: int
    records: list[Record] = field(default_factory=list)
    scanned: int = 0
    next_start: int = 1


def find(
    entity: str,
    *,
    start: int = 1,
    count: int,
    where: str | None = None,
    scan_limit: int = 10_000,
    session_id: str | None = None,
    connection: ConnectionLike = None,
) -> Found:
    """Up to ``count`` records from sequence number ``start`` on. With ``where``, only matching
    records, looking through at most ``scan_limit`` messages and stopping as soon as ``count`` matched
    (the scan is closed then, so no further pages are read)."""
    matches = core.compile_where(where) if where else None  # a bad expression fails before any peek
    found = Found(start, next_start=start)
    limit = count if matches is None else scan_limit
    pages = core.scan(entity, start=start, limit=limit, session_id=session_id, connection=connection)
    try:
        for page in pages:
            for record in page:
                found.scanned += 1
                found.next_start = int(record["sequence_number"]) + 1
                if matches is None or matches(record):
                    found.records.append(record)
                    if len(found.records) >= count:
                        return found
    finally:
        pages.close()  # stops the scan's read-ahead once enough matched
    return found
