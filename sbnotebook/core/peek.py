"""Non-destructive peeks: no locks taken, delivery counts untouched."""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .clients import receiver
from .connection import Connection, resolve
from .entities import EntityPath
from .errors import InvalidInputError, from_sdk
from .records import to_dataframe, to_record

SDK_PAGE = 250  # the most the SDK returns per peek call in practice


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
    connection: str | Connection | None = None,
) -> PeekPage:
    """Peek up to ``count`` messages from ``from_sequence_number`` on (active, deferred and,
    on queues, scheduled ones, each with its state). Works on dead-letter queues and sessions."""
    path = EntityPath.parse(entity)
    if not isinstance(count, int) or count < 1:
        raise InvalidInputError(f"count must be a positive whole number, not {count!r}.")
    if not isinstance(from_sequence_number, int) or from_sequence_number < 0:
        raise InvalidInputError(f"from_sequence_number must be 0 or more, not {from_sequence_number!r}.")
    conn = resolve(connection)
    page = PeekPage(str(path), from_sequence_number)
    kwargs: dict[str, Any] = {"session_id": session_id} if session_id is not None else {}
    try:
        with conn.client(retry_total=2) as client, receiver(client, path, **kwargs) as rcv:
            start = max(from_sequence_number, 1)
            while len(page.records) < count:
                batch = rcv.peek_messages(
                    max_message_count=min(SDK_PAGE, count - len(page.records)), sequence_number=start
                )
                if not batch:
                    break
                page.records.extend(to_record(m, str(path)) for m in batch)
                start = (batch[-1].sequence_number or start) + 1
    except Exception as exc:
        if isinstance(exc, InvalidInputError):
            raise
        raise from_sdk(exc, entity=str(path)) from None
    return page
