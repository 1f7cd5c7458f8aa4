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

from proton import Data, symbol

from ..broker.model import MessageData, StoredMessage
from ..broker.values import NO_ENTRIES, copy_value, section_value
from ..net.amqpvalues import EncodingError
from .sections import (
    APPLICATION_PROPERTIES,
    BODY_SECTIONS,
    DELIVERY_ANNOTATIONS,
    FOOTER,
    HEADER,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    Sections,
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


def _key_text(value: Any) -> str | None:
    """The partition key as filters read it (the annotation itself is forwarded with its own type)."""
    if isinstance(value, (bytes, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return None if value is None else str(value)


def _seconds(ts: Any) -> float | None:
    if ts is None:
        return None
    if hasattr(ts, "timestamp"):
        return float(ts.timestamp())
    return int(ts) / 1000.0


def decode_transfer(encoded: bytes, batch: bool | None = None) -> list[MessageData]:
    """A transfer's payload -> one message, or the messages of a batch envelope.
    ``batch``: the transfer's message-format said batch (True) or not (False); None = unknown,
    then the envelope's shape decides."""
    try:
        sections = split_sections(encoded)
    except EncodingError as exc:
        raise DecodeError(f"malformed AMQP message: {exc}") from None
    if batch is False:
        return [decode_message(encoded, sections)]
    try:
        inner = batch_messages(encoded, sections, strict=batch is True)
    except EncodingError as exc:
        raise DecodeError(f"malformed batch: {exc}") from None
    if inner is not None:
        return [decode_message(m, parts) for m, parts in inner]
    return [decode_message(encoded, sections)]


def decode_message(encoded: bytes, sections: Sections | None = None) -> MessageData:
    """Decode only the sections the broker reads; the body is never decoded."""
    try:
        if sections is None:
            sections = split_sections(encoded)
        # No body section is allowed: ServiceBusMessage(body=None) sends none, and gets none back.
        values = {c: (s, e) for c, s, e in sections if c not in BODY_SECTIONS and c != FOOTER}
        header = section_value(encoded, *values[HEADER]) if HEADER in values else None
        ann = section_value(encoded, *values[MESSAGE_ANNOTATIONS]) if MESSAGE_ANNOTATIONS in values else None
        props = section_value(encoded, *values[PROPERTIES]) if PROPERTIES in values else None
        app = section_value(encoded, *values[APPLICATION_PROPERTIES]) if APPLICATION_PROPERTIES in values else None
    except Exception as exc:  # EncodingError, or proton's DataException family
        raise DecodeError(f"malformed AMQP message: {exc}") from None
    header = list(header or []) + [None] * 5
    fields = list(props or []) + [None] * 13
    annotations = copy_value(dict(ann or {}))
    if not isinstance(app, dict) and app is not None:
        raise DecodeError("malformed AMQP message: application-properties is not a map")
    scheduled = annotations.get(SCHEDULED_ENQUEUE_TIME)
    partition_key = annotations.get(PARTITION_KEY)
    ttl_ms = header[2]
    raw_da = b""
    if DELIVERY_ANNOTATIONS in values:  # kept encoded, so every value keeps its AMQP type
        start, end = values[DELIVERY_ANNOTATIONS]
        raw_da = encoded[start + 3 : end]  # after the 0x00 0x53 0x71 descriptor
        if raw_da[:1] not in (b"\xc1", b"\xd1"):
            raw_da = b""  # null or an empty section: nothing to forward
    raw_properties = encoded[values[PROPERTIES][0] : values[PROPERTIES][1]] if PROPERTIES in values else b""
    message_id = _text(fields[0])
    if message_id is None:
        # Service Bus gives every message an id: one sent without gets a fresh GUID (32 hex
        # digits, .NET's "N" form) that it keeps for life (receive, peek, dead-letter, forward).
        message_id = uuid.uuid4().hex
        raw_properties = with_message_id(raw_properties, message_id)
    return MessageData(
        raw_delivery_annotations=raw_da,
        raw_properties=raw_properties,
        raw_body=b"".join(encoded[s:e] for c, s, e in sections if c in BODY_SECTIONS or c == FOOTER),
        raw_application_properties=(
            encoded[values[APPLICATION_PROPERTIES][0] : values[APPLICATION_PROPERTIES][1]]
            if APPLICATION_PROPERTIES in values
            else b""
        ),
        size=len(encoded),
        durable=bool(header[0]),
        priority=4 if header[1] is None else int(header[1]),
        annotations={k: v for k, v in annotations.items() if k not in _BROKER_OWNED} or NO_ENTRIES,  # types kept
        message_id=message_id,
        to=_text(fields[2]),
        subject=_text(fields[3]),
        reply_to=_text(fields[4]),
        correlation_id=_text(fields[5]),
        content_type=_text(fields[6]),
        session_id=_text(fields[10]),
        reply_to_session_id=_text(fields[12]),
        partition_key=_key_text(partition_key),
        ttl=int(ttl_ms) / 1000.0 if ttl_ms else None,
        scheduled_enqueue_time=_seconds(scheduled),
        # Decoded again only if something reads them (filters, settlement): most never do.
        application_properties=None,
    )


def with_message_id(raw_properties: bytes, message_id: str) -> bytes:
    """The encoded properties section with ``message_id`` in its empty (null) first field; a
    properties section holding only that field if there was none."""
    value = _str(message_id)
    if not raw_properties:
        return b"\x00\x53\x73\xc0" + bytes([len(value) + 1, 1]) + value
    ctor = raw_properties[3]
    if ctor == 0x45:  # list0: no fields at all
        count, rest = 0, b""
    elif ctor == 0xC0:
        count, rest = raw_properties[5], raw_properties[6:]
    elif ctor == 0xD0:
        count, rest = struct.unpack_from(">I", raw_properties, 8)[0], raw_properties[12:]
    else:
        raise DecodeError(f"malformed AMQP message: properties encoded with constructor 0x{ctor:02x}")
    if count:
        if rest[:1] != b"\x40":
            raise DecodeError("malformed AMQP message: a message-id that is neither null nor readable")
        rest = rest[1:]
    items = value + rest
    count = max(count, 1)
    if len(items) + 1 < 256 and count < 256:
        return b"\x00\x53\x73\xc0" + bytes([len(items) + 1, count]) + items
    return b"\x00\x53\x73\xd0" + struct.pack(">II", len(items) + 4, count) + items


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


def _any_value(value: Any) -> bytes:
    d = Data()
    d.put_object(value)
    return d.encode()


def _sym(name: str) -> bytes:
    raw = name.encode()
    return b"\xa3" + bytes([len(raw)]) + raw


def _long(v: int) -> bytes:
    return b"\x81" + struct.pack(">q", v)


def _ts(seconds: float) -> bytes:
    return b"\x83" + struct.pack(">q", int(seconds * 1000))


def _str(v: str) -> bytes:
    raw = v.encode()
    if len(raw) < 256:
        return b"\xa1" + bytes([len(raw)]) + raw
    return b"\xb1" + struct.pack(">I", len(raw)) + raw


_K_SEQ = _sym(SEQUENCE_NUMBER)
_K_ENQ = _sym(ENQUEUED_TIME)
_K_ESEQ = _sym(ENQUEUE_SEQUENCE_NUMBER)
_K_STATE = _sym(MESSAGE_STATE)
_K_LOCKED = _sym(LOCKED_UNTIL)
_K_SCHED = _sym(SCHEDULED_ENQUEUE_TIME)
_K_DLSRC = _sym(DEAD_LETTER_SOURCE)
_OWN_KEYS = {SCHEDULED_ENQUEUE_TIME}
_K_LOCK_TOKEN = _sym(LOCK_TOKEN)


def _annotations(msg: StoredMessage, locked_until: float | None) -> bytes:
    """The message-annotations section, encoded by hand: it is built for every delivery and peek."""
    data = msg.data
    items = [
        _K_SEQ + _long(msg.sequence_number),
        _K_ENQ + _ts(msg.enqueued_time),
        _K_ESEQ + _long(msg.enqueue_sequence_number),
        _K_STATE + b"\x71" + struct.pack(">i", int(msg.state)),
    ]
    if locked_until is not None:
        items.append(_K_LOCKED + _ts(locked_until))
    if data.scheduled_enqueue_time is not None:
        items.append(_K_SCHED + _ts(data.scheduled_enqueue_time))
    if msg.dead_letter_source is not None:
        items.append(_K_DLSRC + _str(msg.dead_letter_source))
    for key, value in data.annotations.items():
        if key not in _OWN_KEYS:
            items.append(_any_value(key) + _any_value(value))
    body = b"".join(items)
    count = len(items) * 2
    if len(body) + 1 < 256:
        return b"\x00\x53\x72\xc1" + bytes([len(body) + 1, count]) + body
    return b"\x00\x53\x72\xd1" + struct.pack(">II", len(body) + 4, count) + body


def _delivery_annotations(sent: bytes, lock_token: uuid.UUID | None) -> bytes:
    """The sender's delivery annotations (as encoded), plus ``x-opt-lock-token`` on peek-lock deliveries."""
    if sent[:1] == b"\xc1":
        count, items = sent[2], sent[3:]
    elif sent[:1] == b"\xd1":
        count, items = struct.unpack_from(">I", sent, 5)[0], sent[9:]
    else:
        count, items = 0, b""
    if lock_token is not None:
        items += _K_LOCK_TOKEN + b"\x98" + lock_token.bytes
        count += 2
    if not count:
        return b""
    if len(items) + 1 < 256 and count < 256:
        return b"\x00\x53\x71\xc1" + bytes([len(items) + 1, count]) + items
    return b"\x00\x53\x71\xd1" + struct.pack(">II", len(items) + 4, count) + items


def encode_stored(
    msg: StoredMessage, *, locked_until: float | None = None, lock_token: uuid.UUID | None = None
) -> bytes:
    """The message as a receiver (or a peek) sees it. ``lock_token``: a peek-lock delivery's token,
    which Service Bus also puts in the delivery annotations."""
    data = msg.data
    header = _header(data, msg.delivery_count)
    if lock_token is not None or data.raw_delivery_annotations:
        header += _delivery_annotations(data.raw_delivery_annotations, lock_token)
    parts = [header, _annotations(msg, locked_until), data.raw_properties]
    changed = msg.changed_properties
    if changed is None:
        parts.append(data.raw_application_properties)
    elif changed:
        parts.append(_described(APPLICATION_PROPERTIES, changed))
    parts.append(data.raw_body)
    return b"".join(parts)


def lock_tag(token: uuid.UUID) -> bytes:
    """Service Bus delivery tags are lock tokens in .NET GUID byte order."""
    return token.bytes_le
