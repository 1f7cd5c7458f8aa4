"""One message's journey: what happened to it, oldest first, one row per event (``journey``).

On the embedded emulator the broker kept it: each delivery with its delivery count (Service Bus's,
the first is 1) and lock, lock expiries, settlements, dead-lettering and why, expiry, forwarding
(``sbnotebook.emulator``'s journey, read over its administration API). A copy the kit sent
(resubmit, copy, import: ``sbnotebook-original-message-id``) is followed back to its original, and
an original forward to its copies.

Service Bus keeps no such history: on Azure the rows are what the message itself carries, found by
peeking the entity and its dead-letter queue (when it was enqueued, how many deliveries so far, why
it was dead-lettered, the trace context and the original it was copied from), and a note says what
only the service's logs hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..connections.live import LiveConnection
from ..connections.registry import ConnectionLike, live
from ..entities import EntityPath
from ..errors import InvalidInputError, ServiceError
from ..tracing import original_context
from .copies import ORIGINAL_ID
from .peek import MAX_SCANNED, peek

COLUMNS = (
    "time",
    "event",
    "entity",
    "sequence_number",
    "message_id",
    "delivery_count",
    "lock_token",
    "reason",
    "description",
    "to",
    "came_from",
    "operation",
    "traceparent",
    "original_message_id",
)
ON_AZURE = (
    "Service Bus keeps no history of a message: each delivery, lock expiry, abandon and the moment "
    "it was dead-lettered are only in the namespace's diagnostic logs (and in traces, where the "
    "sender and receivers trace). These rows are what the message itself carries."
)
COPY_SENT = "sent by the kit as a copy of {original} (resubmit, copy or import)"
COMPLETED_AFTER_COPY = "completed by the kit once its copy was sent (resubmit)"


@dataclass
class Journey:
    """A message's journey: ``rows`` oldest first (``COLUMNS``), where they come from (``source``:
    ``emulator``, the broker's own record, or ``message``, what the message carries) and ``notes``
    (what is missing, and why)."""

    entity: str
    source: str
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def to_pandas(self) -> Any:
        import pandas as pd

        frame = pd.DataFrame(self.rows, columns=list(COLUMNS))
        return frame.astype({"sequence_number": "Int64", "delivery_count": "Int64"})  # no NaN floats for "none"


def journey(
    entity: str | EntityPath,
    *,
    message_id: str | None = None,
    sequence_number: int | None = None,
    trace_id: str | None = None,
    connection: ConnectionLike = None,
) -> Journey:
    """The journey of the message named by one of ``message_id``, ``sequence_number``, ``trace_id``
    in ``entity`` (a queue, topic or subscription; its dead-letter queue is part of it)."""
    if sum(x is not None for x in (message_id, sequence_number, trace_id)) != 1:
        raise InvalidInputError("Name the message by one of message_id, sequence_number or trace_id.")
    path = EntityPath.parse(entity)
    conn = live(connection)
    if conn.settings.is_emulator and conn.settings.connection_string is not None:
        return _from_emulator(conn, str(path.parent), message_id, sequence_number, trace_id)
    return _from_message(conn, path, message_id, sequence_number, trace_id)


def _from_emulator(
    conn: LiveConnection, entity: str, message_id: str | None, sequence_number: int | None, trace_id: str | None
) -> Journey:
    from ...emulator import read_journey  # here: the emulator (and proton) only when one is asked

    assert conn.settings.connection_string is not None
    try:
        answer = read_journey(
            conn.settings.connection_string,
            entity,
            message_id=message_id,
            sequence_number=sequence_number,
            trace_id=trace_id,
        )
    except ValueError as exc:
        raise InvalidInputError(str(exc)) from None
    except RuntimeError as exc:
        raise ServiceError(f"The journey could not be read: {exc}") from None
    rows = [{**row, "operation": None} for row in answer.events]
    _name_operations(rows)
    notes = []
    if answer.dropped:
        notes.append(
            f"The emulator keeps its last {answer.capacity:,} events and has dropped {answer.dropped:,} "
            "older ones: this journey may have begun before its first row."
        )
    if answer.truncated:
        notes.append(f"Only the first {len(rows):,} events are shown.")
    if not rows:
        notes.append(f"The emulator noted nothing of this message in {entity}.")
    return Journey(entity, "emulator", rows, notes)


def _name_operations(rows: list[dict[str, Any]]) -> None:
    """The kit's part, where the rows show it: a copy it sent, and the original it completed after."""
    copied_at: dict[str, Any] = {}
    for row in rows:
        if row["event"] == "accepted" and row["original_message_id"]:
            row["operation"] = COPY_SENT.format(original=row["original_message_id"])
            copied_at.setdefault(row["original_message_id"], row["time"])
    for row in rows:
        sent = copied_at.get(row["message_id"])
        if row["event"] == "completed" and sent is not None and row["time"] >= sent:
            row["operation"] = COMPLETED_AFTER_COPY


def _matches(message_id: str | None, sequence_number: int | None, trace_id: str | None) -> Any:
    def match(record: dict[str, Any]) -> bool:
        if message_id is not None:
            return bool(record.get("message_id") == message_id)
        if sequence_number is not None:
            return bool(record.get("sequence_number") == sequence_number)
        context = original_context(record.get("application_properties")) or ""
        return f"-{trace_id}-" in str(context)

    return match


def _property(record: dict[str, Any], name: str) -> Any:
    return (record.get("application_properties") or {}).get(name)


def _from_message(
    conn: LiveConnection, path: EntityPath, message_id: str | None, sequence_number: int | None, trace_id: str | None
) -> Journey:
    """What the message carries, found in the entity or its dead-letter queue by peeking."""
    match = _matches(message_id, sequence_number, trace_id)
    found: list[list[dict[str, Any]]] = []
    notes = [ON_AZURE]
    for where in (path.parent, path.parent.dead_letter):
        start = sequence_number if sequence_number is not None else 1
        page = peek(where, max_messages=1, from_sequence_number=start, where=match, connection=conn)
        found += [_rows_of(record, str(where)) for record in page.records]
        if not page.records and page.scanned >= MAX_SCANNED:
            notes.append(f"{where}: the first {page.scanned:,} messages looked at held none that matched.")
    rows = [row for rows in found for row in rows]
    if not rows:
        notes.append(f"No such message is in {path.parent} or its dead-letter queue now.")
    return Journey(str(path.parent), "message", rows, notes)


def _rows_of(record: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """Rows for what a peeked message tells of its past: enqueued, delivered so far, dead-lettered."""
    base: dict[str, Any] = dict.fromkeys(COLUMNS)
    base.update(
        entity=where,
        sequence_number=record.get("sequence_number"),
        message_id=record.get("message_id"),
        traceparent=original_context(record.get("application_properties")),
        original_message_id=_property(record, ORIGINAL_ID),
    )
    rows = [{**base, "time": record.get("enqueued_time"), "event": "enqueued"}]
    if base["original_message_id"]:
        rows[0]["operation"] = COPY_SENT.format(original=base["original_message_id"])
    # A peeked message's count is the deliveries attempted so far (the SDK shows it as Service Bus keeps it)
    deliveries = record.get("delivery_count") or 0
    if deliveries:
        rows.append({**base, "event": "delivered", "delivery_count": deliveries, "description": "deliveries so far"})
    if record.get("dead_letter_reason") is not None or EntityPath.parse(where).sub_queue == "dead_letter":
        rows.append(
            {
                **base,
                "event": "dead_lettered",
                "delivery_count": deliveries or None,
                "reason": record.get("dead_letter_reason"),
                "description": record.get("dead_letter_error_description"),
                "came_from": record.get("dead_letter_source"),
                "to": where,
            }
        )
    return rows
