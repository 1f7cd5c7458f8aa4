"""One message's journey, found in the log: by message id, sequence number or trace id, within an
entity (a queue, a topic, a subscription; its dead-letter queue belongs to it), and followed on.

Message ids identify a message across entities (forwarding, fan-out and dead-lettering keep them);
a copy made by the kit's resubmit, copy or import names its original in
``sbnotebook-original-message-id``, so the journey follows a copy back to its original and an
original forward to its copies. A message without a message id is followed by its sequence number
in the entity only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .log import MAX_EVENTS, JourneyEvent, JourneyLog

DEAD_LETTER_SUFFIX = "/$deadletterqueue"
TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
MAX_MESSAGE_ID = 128  # Service Bus's longest message id


class JourneyQueryError(ValueError):
    """A journey asked for in a way that cannot be answered (the message says how to ask)."""


@dataclass(frozen=True)
class JourneyQuery:
    """Which message: exactly one of ``message_id``, ``sequence_number``, ``trace_id``, in ``entity``."""

    entity: str
    message_id: str | None = None
    sequence_number: int | None = None
    trace_id: str | None = None
    limit: int = MAX_EVENTS

    def __post_init__(self) -> None:
        given = [x for x in (self.message_id, self.sequence_number, self.trace_id) if x is not None]
        if len(given) != 1:
            raise JourneyQueryError("Name the message by one of message id, sequence number or trace id.")
        if not self.entity.strip("/"):
            raise JourneyQueryError("Name the entity (a queue, topic or subscription) the message was in.")
        if self.message_id is not None and not 0 < len(self.message_id) <= MAX_MESSAGE_ID:
            raise JourneyQueryError(f"A message id has 1 to {MAX_MESSAGE_ID} characters.")
        if self.sequence_number is not None and self.sequence_number < 0:
            raise JourneyQueryError("A sequence number is 0 or more.")
        if self.trace_id is not None and not TRACE_ID.match(self.trace_id):
            raise JourneyQueryError("A trace id is 32 lower-case hexadecimal digits (W3C trace context).")
        if not 0 < self.limit <= MAX_EVENTS:
            raise JourneyQueryError(f"The limit is 1 to {MAX_EVENTS} events.")


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id of a W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``), or None."""
    if not traceparent:
        return None
    parts = traceparent.strip().split("-")
    return parts[1].lower() if len(parts) >= 4 and TRACE_ID.match(parts[1].lower()) else None


def family(entity: str) -> str:
    """The entity a path belongs to, lower case: a dead-letter queue belongs to its entity."""
    path = entity.strip("/").lower()
    return path.removesuffix(DEAD_LETTER_SUFFIX)


def _within(path: str, entity: str) -> bool:
    """``path`` (an event's entity) is ``entity``, its dead-letter queue, or (a topic) its subscriptions."""
    p = path.lower()
    return p == entity or p.startswith(entity + "/")


def _seeds(events: list[JourneyEvent], query: JourneyQuery) -> list[JourneyEvent]:
    where = family(query.entity)
    found = [e for e in events if _within(e.entity, where)]
    if query.message_id is not None:
        return [e for e in found if e.message_id == query.message_id]
    if query.sequence_number is not None:
        return [e for e in found if e.sequence_number == query.sequence_number]
    return [e for e in found if trace_id_of(e.traceparent) == query.trace_id]


def _related_ids(events: Iterable[JourneyEvent], ids: set[str]) -> set[str]:
    """``ids`` with the copies of each (whose original it is) and the original of each, repeatedly."""
    links = [(e.message_id, e.original_message_id) for e in events if e.message_id and e.original_message_id]
    grown = True
    while grown:
        grown = False
        for copy, original in links:
            if (copy in ids) != (original in ids):
                ids.update((copy, original))
                grown = True
    return ids


def journey(events: list[JourneyEvent], query: JourneyQuery) -> tuple[list[JourneyEvent], bool]:
    """The message's events, its copies' and its original's, oldest first (at most ``limit``), and
    whether there were more."""
    seeds = _seeds(events, query)
    ids = {e.message_id for e in seeds if e.message_id is not None}
    if not ids:
        found = seeds  # messages without an id: what happened to them in this entity
    else:
        ids = _related_ids(events, ids)
        found = [e for e in events if e.message_id in ids]
    return found[: query.limit], len(found) > query.limit


@dataclass(frozen=True)
class JourneyAnswer:
    """What ``Emulator.journey`` and ``GET /$emulator/journey`` answer: the rows, oldest first (each
    event as a dict, its ``time`` a UTC datetime), whether ``limit`` cut them short, how many of
    the oldest events the broker's log has dropped since it started (the journey may begin
    before what it shows when that is not 0) and how many it keeps."""

    events: list[dict[str, Any]]
    truncated: bool
    dropped: int
    capacity: int

    def to_json(self) -> str:
        rows = [{**row, "time": row["time"].strftime(TIME_FORMAT)} for row in self.events]
        return json.dumps(
            {"events": rows, "truncated": self.truncated, "dropped": self.dropped, "capacity": self.capacity}
        )


TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def row(e: JourneyEvent) -> dict[str, Any]:
    found: dict[str, Any] = e.as_dict()
    found["time"] = datetime.fromtimestamp(e.time, UTC)
    found["lock_token"] = None if e.lock_token is None else str(e.lock_token)
    return found


def answer(log: JourneyLog, query: JourneyQuery) -> JourneyAnswer:
    found, truncated = journey(log.events(), query)
    return JourneyAnswer([row(e) for e in found], truncated, log.dropped, log.capacity)
