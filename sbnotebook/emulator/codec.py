"""proton <-> broker: decode what senders send, encode what receivers get.

Properties, body sections and footer are forwarded byte for byte; the header and
message annotations are rebuilt by the broker (delivery count, sequence number,
lock expiry, state), and application properties are re-encoded because settlement
may modify them.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from proton import Data, Message, symbol, timestamp

from .model import MessageData, StoredMessage
from .sections import (
    APPLICATION_PROPERTIES,
    BODY_SECTIONS,
    FOOTER,
    PROPERTIES,
    SectionError,
    batch_messages,
    split_sections,
)

SEQUENCE_NUMBER = symbol("x-opt-sequence-number")
ENQUEUED_TIME = symbol("x-opt-enqueued-time")
LOCKED_UNTIL = symbol("x-opt-locked-until")
ENQUEUE_SEQUENCE_NUMBER = symbol("x-opt-enqueue-sequence-number")
PARTITION_KEY = symbol("x-opt-partition-key")
SCHEDULED_ENQUEUE_TIME = symbol("x-opt-scheduled-enqueue-time")
DEAD_LETTER_SOURCE = symbol("x-opt-deadletter-source")
MESSAGE_STATE = symbol("x-opt-message-state")
LOCK_TOKEN = symbol("x-opt-lock-token")
_BROKER_OWNED = {
    SEQUENCE_NUMBER,
    ENQUEUED_TIME,
    LOCKED_UNTIL,
    ENQUEUE_SEQUENCE_NUMBER,
    DEAD_LETTER_SOURCE,
    MESSAGE_STATE,
    LOCK_TOKEN,
}


class DecodeError(ValueError):
    pass


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (bytes, memoryview)):
        return bytes(value).hex()
    return str(value)


def _seconds(ts: Any) -> float | None:
    if ts is None:
        return None
    if hasattr(ts, "timestamp"):
        return float(ts.timestamp())
    return int(ts) / 1000.0


def _copy(value: Any) -> Any:
    """proton hands out memoryviews for binary values: copy before they go stale."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {_copy(k): _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def decode_transfer(encoded: bytes) -> list[MessageData]:
    """A transfer's payload -> one message, or the messages of a batch envelope."""
    inner = batch_messages(encoded)
    if inner is not None:
        return [decode_message(m) for m in inner]
    return [decode_message(encoded)]


def decode_message(encoded: bytes) -> MessageData:
    msg = Message()
    try:
        msg.decode(encoded)
        sections = split_sections(encoded)
    except (SectionError, Exception) as exc:  # proton raises its own DataException family
        raise DecodeError(f"malformed AMQP message: {exc}") from None
    raw_properties = b"".join(encoded[s:e] for c, s, e in sections if c == PROPERTIES)
    raw_body = b"".join(encoded[s:e] for c, s, e in sections if c in BODY_SECTIONS or c == FOOTER)
    annotations = _copy(dict(msg.annotations or {}))
    scheduled = annotations.get(SCHEDULED_ENQUEUE_TIME)
    partition_key = annotations.get(PARTITION_KEY)
    sender_annotations = {k: v for k, v in annotations.items() if k not in _BROKER_OWNED}
    app = _copy(dict(msg.properties or {}))
    ttl = msg.ttl or None
    return MessageData(
        raw_properties=raw_properties,
        raw_body=raw_body,
        size=len(encoded),
        durable=bool(msg.durable),
        priority=int(msg.priority),
        annotations=sender_annotations,
        message_id=_text(msg.id),
        correlation_id=_text(msg.correlation_id),
        subject=_text(msg.subject),
        content_type=_text(msg.content_type),
        to=_text(msg.address),
        reply_to=_text(msg.reply_to),
        reply_to_session_id=_text(msg.reply_to_group_id),
        session_id=_text(msg.group_id),
        partition_key=_text(partition_key),
        ttl=float(ttl) if ttl else None,
        scheduled_enqueue_time=_seconds(scheduled),
        application_properties=app,
    )


def _header(data: MessageData, delivery_count: int) -> bytes:
    ttl = b"\x70" + struct.pack(">I", int(data.ttl * 1000)) if data.ttl else b"\x40"
    fields = (
        (b"\x41" if data.durable else b"\x42")
        + b"\x50"
        + bytes([data.priority & 0xFF])
        + ttl
        + b"\x42"  # first-acquirer
        + b"\x70"
        + struct.pack(">I", delivery_count)
    )
    return b"\x00\x53\x70\xc0" + bytes([len(fields) + 1, 5]) + fields


def _described(code: int, value: dict[Any, Any]) -> bytes:
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(code)
    d.put_object(value)
    d.exit()
    return d.encode()


def encode_stored(msg: StoredMessage, *, locked_until: float | None = None) -> bytes:
    """The message as a receiver (or a peek) sees it."""
    data = msg.data
    ann: dict[Any, Any] = dict(data.annotations)
    ann[SEQUENCE_NUMBER] = msg.sequence_number
    ann[ENQUEUED_TIME] = timestamp(int(msg.enqueued_time * 1000))
    ann[ENQUEUE_SEQUENCE_NUMBER] = msg.enqueue_sequence_number
    ann[MESSAGE_STATE] = int(msg.state)
    if locked_until is not None:
        ann[LOCKED_UNTIL] = timestamp(int(locked_until * 1000))
    if data.partition_key is not None:
        ann[PARTITION_KEY] = data.partition_key
    if data.scheduled_enqueue_time is not None:
        ann[SCHEDULED_ENQUEUE_TIME] = timestamp(int(data.scheduled_enqueue_time * 1000))
    if msg.dead_letter_source is not None:
        ann[DEAD_LETTER_SOURCE] = msg.dead_letter_source
    parts = [_header(data, msg.delivery_count), _described(0x72, ann), data.raw_properties]
    if msg.application_properties:
        parts.append(_described(APPLICATION_PROPERTIES, msg.application_properties))
    parts.append(data.raw_body)
    return b"".join(parts)


def lock_tag(token: uuid.UUID) -> bytes:
    """Service Bus delivery tags are lock tokens in .NET GUID byte order."""
    return token.bytes_le
