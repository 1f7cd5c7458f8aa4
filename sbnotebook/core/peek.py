"""Non-destructive peeks: no locks taken, delivery counts untouched."""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .entities import EntityPath
from .live import ConnectionLike
from .records import to_dataframe
from .scan import scan_records


@dataclass
class PeekPage:
    """One page of peeked messages as records, with where the next page starts."""

    entity: str
    from_sequence_number: int
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def next_sequence_number(self) -> int:
        if not self.records:
            return self.from_sequence_number
        return int(self.records[-1]["sequence_number"]) + 1

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records)

    def __repr__(self) -> str:
        if not self.records:
            return f"<PeekPage {self.entity}: empty from sequence number {self.from_sequence_number}>"
        first, last = self.records[0]["sequence_number"], self.records[-1]["sequence_number"]
        return f"<PeekPage {self.entity}: {len(self.records)} messages, sequence numbers {first}..{last}>"

    def to_pandas(self) -> Any:
        return to_dataframe(self.records)

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(repr(self))}</p>" + self.to_pandas().to_html(max_rows=50, notebook=True)


def peek(
    entity: str | EntityPath,
    *,
    count: int = 100,
    from_sequence_number: int = 1,
    session_id: str | None = None,
    connection: ConnectionLike = None,
) -> PeekPage:
    """Peek up to ``count`` messages from ``from_sequence_number`` on (active, deferred and,
    on queues, scheduled ones, each with its state). Works on dead-letter queues and sessions."""
    path = EntityPath.parse(entity)
    records = scan_records(path, start=from_sequence_number, limit=count, session_id=session_id, connection=connection)
    return PeekPage(str(path), from_sequence_number, records)
