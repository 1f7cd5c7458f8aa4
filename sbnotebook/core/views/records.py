"""The one record schema: a received or peeked message as a flat dict.

pandas, Spark and the widgets all use it, so a column means the same thing everywhere.
Application properties become a map of string to string (JSON-encoded where the value
is not a string), the body stays bytes (``body``) with a decoded ``body_text`` where it
is text, and the state is ``active``, ``deferred`` or ``scheduled``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from ..sdk.api import AmqpMessageBodyType
from ..sdk.receiver import is_peeked
from ..times import utc


@dataclass(frozen=True)
class Field:
    """One column of the record schema. ``kind`` is a portable type name that pandas, Spark, Arrow
    and the widgets map to their own; ``sendable`` fields are applied when a record is sent back."""

    name: str
    kind: Literal["string", "long", "int", "double", "timestamp", "binary", "map"]
    doc: str
    sendable: bool = False
    shown: bool = True  # in the widgets' message tables


FIELDS: tuple[Field, ...] = (
    Field("body_text", "string", "the body decoded as UTF-8 text; None for binary bodies"),
    Field("application_properties", "map", "application properties; non-string values JSON-encoded", True),
    Field("subject", "string", "the subject (label)", True),
    Field("message_id", "string", "the message id (duplicate detection keys on it)", True),
    Field("sequence_number", "long", "the broker's sequence number, unique per entity"),
    Field("enqueued_time", "timestamp", "when the broker accepted the message (UTC)"),
    Field("state", "string", "active, deferred or scheduled"),
    Field("delivery_count", "int", "Service Bus's: received, the delivery under way counts (the first is 1)"),
    Field("dead_letter_reason", "string", "why it was dead-lettered"),
    Field("dead_letter_error_description", "string", "the dead-letter description"),
    Field("dead_letter_source", "string", "the entity it was dead-lettered from (auto-forwarding)"),
    Field("locked_until", "timestamp", "when the lock expires (received messages)", shown=False),
    Field("lock_token", "string", "the lock token (received messages)", shown=False),
    Field("session_id", "string", "the session id", True),
    Field("partition_key", "string", "the partition key", True),
    Field("correlation_id", "string", "the correlation id", True),
    Field("content_type", "string", "the content type", True),
    Field("to", "string", "the 'to' address", True, shown=False),
    Field("reply_to", "string", "the reply-to address", True, shown=False),
    Field("time_to_live", "double", "time to live in seconds", True, shown=False),
    Field("scheduled_enqueue_time", "timestamp", "when a scheduled message becomes active (UTC)", True),
    Field("body", "binary", "the body bytes, whatever the AMQP body type", True, shown=False),
    Field("entity", "string", "the entity it was read from", shown=False),
)
"""The one list of record fields, each with its kind and what it holds. Body first: what the
message says comes before how it travelled."""
RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in FIELDS)
"""The record's field names, in ``FIELDS``' order: the columns of every DataFrame of records."""
SENDABLE_FIELDS: tuple[str, ...] = tuple(f.name for f in FIELDS if f.sendable)
SHOWN_FIELDS: tuple[str, ...] = tuple(f.name for f in FIELDS if f.shown)
RECORD_KIND: dict[str, str] = {f.name: f.kind for f in FIELDS}
TIMESTAMP_FIELDS: tuple[str, ...] = tuple(f.name for f in FIELDS if f.kind == "timestamp")

_CONTROL = re.compile(rb"[\x00-\x08]")
_BINARY_TYPES = ("application/octet-stream", "application/x-protobuf", "application/avro", "image/", "audio/")


def utf8(data: bytes | bytearray | memoryview) -> str | None:
    """``data`` decoded as UTF-8, or None when it is not UTF-8 (each caller says what stands in)."""
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError:
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def property_value(value: Any) -> str:
    """An application property as a string: strings as they are, anything else JSON-encoded."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        text = utf8(value)  # the SDK hands AMQP strings back as bytes
        return text if text is not None else json.dumps({"$binary": bytes(value).hex()})
    if isinstance(value, str):
        return value
    if isinstance(value, (dt.datetime, dt.date)):
        return json.dumps(value.isoformat())
    if isinstance(value, (dt.timedelta,)):
        return json.dumps(value.total_seconds())
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return json.dumps(str(value))


def application_properties(raw: dict[Any, Any] | None) -> dict[str, str]:
    return {_text(k) or "": property_value(v) for k, v in (raw or {}).items()}


def body_bytes(message: Any) -> bytes:
    """The body as bytes whatever its AMQP body type (data, value or sequence)."""
    body = message.body
    kind = getattr(message, "body_type", AmqpMessageBodyType.DATA)
    if kind == AmqpMessageBodyType.DATA:
        if isinstance(body, (bytes, bytearray)):
            return bytes(body)
        return b"".join(bytes(part) for part in body)
    if kind == AmqpMessageBodyType.SEQUENCE:
        body = list(body)  # the SDK hands the sequence sections back as a generator
    return json.dumps(_jsonable(body)).encode()


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        text = utf8(value)
        return text if text is not None else {"$binary": bytes(value).hex()}
    if isinstance(value, dict):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def body_text(body: bytes, content_type: str | None) -> str | None:
    """Decoded text when the body is text; None for binary content."""
    if content_type and content_type.lower().startswith(_BINARY_TYPES):
        return None
    if _CONTROL.search(body, 0, 512):  # control bytes: not text
        return None
    return utf8(body)


# Service Bus's message annotations and the dead-letter application properties, by their wire names.
_SEQUENCE = b"x-opt-sequence-number"
_ENQUEUED = b"x-opt-enqueued-time"
_STATE = b"x-opt-message-state"
_PARTITION_KEY = b"x-opt-partition-key"
_SCHEDULED = b"x-opt-scheduled-enqueue-time"
_DEAD_LETTER_SOURCE = b"x-opt-deadletter-source"
_DEAD_LETTER_REASON = b"DeadLetterReason"
_DEAD_LETTER_DESCRIPTION = b"DeadLetterErrorDescription"
_STATES = {None: "active", 0: "active", 1: "deferred", 2: "scheduled"}


def _from_ms(value: Any) -> dt.datetime | None:
    """An AMQP timestamp (milliseconds since the epoch) in UTC; None when unset or 0, as the SDK."""
    return dt.datetime.fromtimestamp(value / 1000.0, dt.UTC) if value else None


def service_bus_delivery_count(header: Any, peeked: bool) -> int | None:
    """The delivery count Service Bus's own tools show (docs/glossary.md, "Delivery count"). The
    AMQP header carries the deliveries that failed before this one: a received message's count is
    one more, the delivery under way (.NET's ``AmqpMessageToSBReceivedMessage``, Java's fix in
    azure-sdk-for-java#11845); a peeked one's is the header as it is (.NET keeps it for a peek:
    azure-service-bus-dotnet#589). The Python SDK's ``delivery_count`` is the header either way."""
    count = None if header is None else header.delivery_count
    if count is None:
        return None
    return int(count) if peeked else int(count) + 1


def to_record(message: Any, entity: str) -> dict[str, Any]:
    """A received or peeked ``ServiceBusReceivedMessage`` as a record.

    Read straight from the message's AMQP sections, each once: the SDK's accessors (sequence_number,
    state, dead_letter_reason, ...) each walk them again, which made this function the largest part
    of a peek's client CPU after the SDK's own decoding (a Spark read is CPU-bound on its workers).
    Same values as the accessors: bytes decoded as UTF-8, unset fields None, timestamps in UTC;
    ``tests/core/views/test_records.py`` compares the two on every kind of message. Lock fields still come from
    the SDK, which updates them when a lock is renewed."""
    raw = body_bytes(message)
    amqp = message.raw_amqp_message
    props, header = amqp.properties, amqp.header
    annotations = amqp.annotations or {}
    app = amqp.application_properties or {}
    content_type = _prop(props, "content_type")
    state = annotations.get(_STATE)
    ttl_ms = header.time_to_live if header is not None else None
    peeked = is_peeked(message)
    lock_token = None if peeked else _safe(lambda: message.lock_token)
    locked_until = None if peeked else _safe(lambda: message.locked_until_utc)
    record = {
        "body_text": body_text(raw, content_type),
        "application_properties": application_properties(app),
        "subject": _prop(props, "subject"),
        "message_id": _prop(props, "message_id"),
        "sequence_number": annotations.get(_SEQUENCE),
        "enqueued_time": _from_ms(annotations.get(_ENQUEUED)),
        "state": _STATES.get(state) or str(state),
        "delivery_count": service_bus_delivery_count(header, peeked),
        "dead_letter_reason": _text(app.get(_DEAD_LETTER_REASON)),
        "dead_letter_error_description": _text(app.get(_DEAD_LETTER_DESCRIPTION)),
        "dead_letter_source": _text(annotations.get(_DEAD_LETTER_SOURCE)),
        "locked_until": None if locked_until is None else utc(locked_until),
        "lock_token": str(lock_token) if lock_token else None,
        "session_id": _prop(props, "group_id"),
        "partition_key": _text(annotations.get(_PARTITION_KEY)),
        "correlation_id": _prop(props, "correlation_id"),
        "content_type": content_type,
        "to": _prop(props, "to"),
        "reply_to": _prop(props, "reply_to"),
        "time_to_live": ttl_ms / 1000 if ttl_ms else None,
        "scheduled_enqueue_time": _from_ms(annotations.get(_SCHEDULED)),
        "body": raw,
        "entity": entity,
    }
    return record  # built in RECORD_FIELDS order (tests/core/views/test_records.py)


def _prop(props: Any, name: str) -> str | None:
    return None if props is None else _text(getattr(props, name, None))


def _safe(fn: Any) -> Any:
    try:
        return fn()
    except Exception:  # peeked messages have no lock: the SDK may raise on lock fields
        return None


def to_dataframe(records: Iterable[dict[str, Any]]) -> Any:
    """Records -> a pandas DataFrame with the schema's columns in order (also when empty)."""
    import pandas as pd

    frame = pd.DataFrame(list(records), columns=list(RECORD_FIELDS))
    for col in TIMESTAMP_FIELDS:
        frame[col] = pd.to_datetime(frame[col], utc=True)
    for f in FIELDS:
        if f.kind in ("long", "int"):
            frame[f.name] = frame[f.name].astype("Int64")
    return frame
