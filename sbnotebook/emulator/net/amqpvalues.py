"""Where an encoded AMQP 1.0 value ends, without decoding it: just enough of the type system for
``sequencing.py`` to read a frame's few fields on the wire and for ``amqp/sections.py`` to split a
message into its sections."""

from __future__ import annotations

import struct

_FIXED = {0x4: 0, 0x5: 1, 0x6: 2, 0x7: 4, 0x8: 8, 0x9: 16}
_VARIABLE = {0xA: 1, 0xB: 4, 0xC: 1, 0xD: 4, 0xE: 1, 0xF: 4}


class EncodingError(ValueError):
    """Bytes that are not (or not wholly) an AMQP-encoded value, frame field or message section."""


def value_end(buf: bytes | memoryview, pos: int) -> int:
    if pos >= len(buf):
        raise EncodingError("truncated value")
    code = buf[pos]
    pos += 1
    if code == 0x00:  # described: descriptor, then value
        return value_end(buf, value_end(buf, pos))
    high = code >> 4
    if high in _FIXED:
        end = pos + _FIXED[high]
    elif high in _VARIABLE:
        width = _VARIABLE[high]
        if pos + width > len(buf):
            raise EncodingError("truncated size")
        size = buf[pos] if width == 1 else struct.unpack_from(">I", buf, pos)[0]
        end = pos + width + size
    else:
        raise EncodingError(f"unknown type constructor 0x{code:02x}")
    if end > len(buf):
        raise EncodingError("truncated value")
    return end
