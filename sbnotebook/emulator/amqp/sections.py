"""A message split into its sections (``net/amqpvalues.py`` finds where each one ends).

proton decodes a message with several data sections as if it had one, and does
not expose a transfer's message-format, so batch envelopes (format 0x80013700,
one complete encoded message per data section) are unpacked here.
"""

from __future__ import annotations

import struct

from ..net.amqpvalues import EncodingError, value_end

HEADER = 0x70
DELIVERY_ANNOTATIONS = 0x71
MESSAGE_ANNOTATIONS = 0x72
PROPERTIES = 0x73
APPLICATION_PROPERTIES = 0x74
DATA = 0x75
AMQP_SEQUENCE = 0x76
AMQP_VALUE = 0x77
FOOTER = 0x78
BODY_SECTIONS = {DATA, AMQP_SEQUENCE, AMQP_VALUE}
_SECTION_ORDER = [HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES, APPLICATION_PROPERTIES]


def split_sections(buf: bytes | memoryview) -> list[tuple[int, int, int]]:
    """[(section code, start, end)] covering the whole buffer, or EncodingError."""
    out = []
    pos = 0
    while pos < len(buf):
        if buf[pos] != 0x00 or pos + 2 > len(buf):
            raise EncodingError("not a described section")
        if buf[pos + 1] == 0x53:
            code = buf[pos + 2]
        elif buf[pos + 1] == 0x80 and pos + 10 <= len(buf):
            code = struct.unpack_from(">Q", buf, pos + 2)[0]
        else:
            raise EncodingError("unexpected section descriptor")
        if code < HEADER or code > FOOTER:
            raise EncodingError(f"unknown section 0x{code:x}")
        end = value_end(buf, pos)
        out.append((code, pos, end))
        pos = end
    return out


def _data_payload(buf: bytes | memoryview, start: int, end: int) -> bytes:
    # data section = 0x00 0x53 0x75 then vbin8 (0xa0 len) or vbin32 (0xb0 len32)
    ctor = buf[start + 3]
    offset = start + 5 if ctor == 0xA0 else start + 8
    return bytes(buf[offset:end])


Sections = list[tuple[int, int, int]]


def _message_sections(buf: bytes, *, need_body: bool) -> Sections | None:
    """The sections of ``buf`` if it is one complete, well-ordered AMQP message, else None.
    Delivery annotations may come anywhere: the SDK's encoder writes them after the body."""
    try:
        sections = split_sections(buf)
    except EncodingError:
        return None
    codes = [c for c, _, _ in sections]
    if not codes or (need_body and not any(c in BODY_SECTIONS for c in codes)):
        return None
    heads = [c for c in codes if c not in BODY_SECTIONS and c != FOOTER and c != DELIVERY_ANNOTATIONS]
    if heads == sorted(heads) and all(c in _SECTION_ORDER for c in heads) and codes.count(DELIVERY_ANNOTATIONS) <= 1:
        return sections
    return None


def batch_messages(
    buf: bytes | memoryview, sections: Sections, *, strict: bool = False
) -> list[tuple[bytes, Sections]] | None:
    """The encoded messages (with their sections) inside a batch envelope whose own sections are
    given, or None if ``buf`` is a plain message.

    ``strict``: the transfer's message-format says this is a batch, so each data section must be a
    message (EncodingError otherwise). Without it the shape decides: all data sections must be
    complete messages with a body, else it is one plain message."""
    data = [(s, e) for c, s, e in sections if c == DATA]
    if not data or any(c in (AMQP_VALUE, AMQP_SEQUENCE) for c, _, _ in sections):
        if strict:
            raise EncodingError("a batch envelope must hold its messages in data sections")
        return None
    inner = []
    for s, e in data:
        payload = _data_payload(buf, s, e)
        parts = _message_sections(payload, need_body=not strict)
        if parts is None:
            if strict:
                raise EncodingError("a data section of the batch is not an AMQP message")
            return None
        inner.append((payload, parts))
    return inner
