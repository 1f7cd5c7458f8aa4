"""Non-destructive peeks: no locks taken, delivery counts untouched."""

from __future__ import annotations

import html
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..connections.registry import ConnectionLike, live
from ..defaults import PEEK_MAX_MESSAGES
from ..entities import EntityPath
from ..renames import renamed
from ..tracing import operation
from ..views.records import to_dataframe
from ..views.search import WhereLike, as_where, type_hint
from .bounds import TimeWindow
from .scan import scan
from .window import When, enqueued_at, enqueued_window, locate, scan_span

Record = dict[str, Any]
SAMPLE = 200  # scanned records a page keeps to explain an empty search
MAX_SCANNED = 10_000
"""Messages a search looks through by default (``peek(max_scanned=)``, ``%sb_peek --max-scanned``,
the browser) before it stops and says so."""


@dataclass
class PeekPage:
    """One page of peeked messages as records, with where the next page starts. With a search
    (``where``), ``records`` are the matches and ``scanned`` how many messages were looked at;
    ``unevaluated`` how many of those the search raised on (not matches), by error in
    ``unevaluated_by_error``. With a time window (``window``), only messages enqueued within it are
    looked at."""

    entity: str
    from_sequence_number: int
    records: list[Record] = field(default_factory=list)
    scanned: int = 0
    next_sequence_number: int = 0  # after every scanned message (0: from_sequence_number)
    where: WhereLike = None
    sample: list[Record] = field(default_factory=list, repr=False)  # the first scanned, for hint()
    window: TimeWindow | None = None
    unevaluated: int = 0
    unevaluated_by_error: dict[str, int] = field(default_factory=dict)
    unevaluated_text: str | None = None  # how many could not be evaluated, by error, in one line

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
    max_messages: int = PEEK_MAX_MESSAGES,
    from_sequence_number: int = 1,
    where: WhereLike = None,
    max_scanned: int = MAX_SCANNED,
    session_id: str | None = None,
    enqueued_after: When | None = None,
    enqueued_before: When | None = None,
    connection: ConnectionLike = None,
) -> PeekPage:
    """Peek up to ``max_messages`` messages from ``from_sequence_number`` on (active, deferred and,
    on queues, scheduled ones, each with its state). Works on dead-letter queues and sessions.

    With ``where`` (a search expression, see ``compile_where``, or a function of a record), only
    matching messages, looking through at most ``max_scanned`` messages and stopping as soon as
    ``max_messages`` matched (no further page is read). A search that raises on every message it
    looked at fails (``WhereFailed``); on some, they are counted (``unevaluated``). ``enqueued_after``
    / ``enqueued_before`` (a datetime, ISO 8601 text, or an age such as ``2h``): only messages
    enqueued at or after / strictly before, found by a search over peeks (window.py), not by reading
    all."""
    path = EntityPath.parse(entity)
    matches = as_where(where)  # a bad expression fails before any peek
    window = enqueued_window(enqueued_after, enqueued_before)
    text = where if isinstance(where, str) or where is None else "<function>"
    page = PeekPage(str(path), from_sequence_number, where=text, window=window)
    limit = max_messages if matches is None else max_scanned
    pages = _pages(path, from_sequence_number, limit, session_id, window, connection)
    with operation("peek", live(connection), path) as span:
        try:
            _fill(page, pages, matches, max_messages, limit)
        finally:
            pages.close()  # stops the scan's read-ahead once enough matched
        span.count(len(page.records))
        span.attribute("sbnotebook.scanned", page.scanned)
    if matches is not None:
        page.unevaluated, page.unevaluated_by_error = matches.unevaluated, matches.by_error()
        page.unevaluated_text = matches.describe()
        matches.check()  # raised on every message looked at: a mistake, said, not an empty page
    return page


def _fill(
    page: PeekPage, pages: Iterator[list[Record]], matches: Callable[[Record], bool] | None, most: int, limit: int
) -> None:
    """Look at the pages' records until ``most`` matched or ``limit`` were looked at."""
    for batch in pages:
        for record in batch:
            page.scanned += 1
            # Forward only: a page in another order (a dead-letter queue) never sends the next one back.
            page.next_sequence_number = max(page.next_sequence_number, int(record["sequence_number"]) + 1)
            if len(page.sample) < SAMPLE:
                page.sample.append(record)
            if matches is None or matches(record):
                page.records.append(record)
                if len(page.records) >= most:
                    return
            if page.scanned >= limit:
                return


def _pages(
    path: EntityPath,
    start: int,
    limit: int,
    session_id: str | None,
    window: TimeWindow | None,
    connection: ConnectionLike,
) -> Generator[list[Record], None, None]:
    """Pages of records to look at: from ``start`` (at most ``limit``), or, with a window, those
    enqueued within it (their sequence numbers found by bisection; a session's are peeked through
    its one receiver and kept by time)."""
    if window is None:
        pages = scan(path, from_sequence_number=start, max_messages=limit, session_id=session_id, connection=connection)
    elif session_id is not None:
        pages = scan(path, from_sequence_number=start, session_id=session_id, connection=connection)
    else:
        span = locate(live(connection), path, window, start)
        if span is None:
            return
        pages = scan_span(path, span, from_sequence_number=start, connection=connection)
    try:
        for batch in pages:
            yield batch if window is None else [r for r in batch if window.holds(enqueued_at(r))]
    finally:
        pages.close()
