"""Non-destructive peeks: no locks taken, delivery counts untouched."""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..connections.registry import ConnectionLike
from ..entities import EntityPath
from ..renames import renamed
from ..views.records import to_dataframe
from ..views.search import Where, predicate, type_hint
from .scan import scan

Record = dict[str, Any]
SAMPLE = 200  # scanned records a page keeps to explain an empty search
MAX_SCANNED = 10_000  # messages a search looks through by default (%sb_peek --max-scanned, the browser)


@dataclass
class PeekPage:
    """One page of peeked messages as records, with where the next page starts. With a search
    (``where``), ``records`` are the matches and ``scanned`` how many messages were looked at."""

    entity: str
    from_sequence_number: int
    records: list[Record] = field(default_factory=list)
    scanned: int = 0
    next_sequence_number: int = 0  # after every scanned message (0: from_sequence_number)
    where: Where = None
    sample: list[Record] = field(default_factory=list, repr=False)  # the first scanned, for hint()

    def __post_init__(self) -> None:
        self.next_sequence_number = self.next_sequence_number or self.from_sequence_number

    def hint(self) -> str | None:
        """Why a search matched nothing, when the messages say (a number compared with a string, ...)."""
        if not isinstance(self.where, str) or not self.where or self.records or not self.sample:
            return None  # a function explains nothing about itself
        return type_hint(self.where, self.sample)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[Record]:
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


@renamed(count="max_messages", scan_limit="max_scanned")
def peek(
    entity: str | EntityPath,
    *,
    max_messages: int = 100,
    from_sequence_number: int = 1,
    where: Where = None,
    max_scanned: int = MAX_SCANNED,
    session_id: str | None = None,
    connection: ConnectionLike = None,
) -> PeekPage:
    """Peek up to ``max_messages`` messages from ``from_sequence_number`` on (active, deferred and,
    on queues, scheduled ones, each with its state). Works on dead-letter queues and sessions.

    With ``where`` (a search expression, see ``compile_where``, or a function of a record), only
    matching messages, looking through at most ``max_scanned`` messages and stopping as soon as
    ``max_messages`` matched (no further page is read)."""
    path = EntityPath.parse(entity)
    matches = predicate(where)  # a bad expression fails before any peek
    page = PeekPage(str(path), from_sequence_number, where=where)
    most = max_messages if matches is None else max_scanned
    pages = scan(
        path, from_sequence_number=from_sequence_number, max_messages=most, session_id=session_id, connection=connection
    )
    try:
        for batch in pages:
            for record in batch:
                page.scanned += 1
                # Forward only: a page in another order (a dead-letter queue) never sends the next one back.
                page.next_sequence_number = max(page.next_sequence_number, int(record["sequence_number"]) + 1)
                if len(page.sample) < SAMPLE:
                    page.sample.append(record)
                if matches is None or matches(record):
                    page.records.append(record)
                    if len(page.records) >= max_messages:
                        return page
    finally:
        pages.close()  # stops the scan's read-ahead once enough matched
    return page
