"""AMQP values with their types, read from a message's encoded bytes, and written as JSON.

The SDK decodes a received message into Python values that lose what the sender chose: an AMQP
``int`` and a ``long`` both become ``int``, a ``string`` and a ``binary`` both ``bytes``, a
``timestamp`` an ``int`` of milliseconds. A copy made from those values changes what a consumer reads
(a .NET consumer's ``(long)props["n"]`` throws on an ``int``). So a copy is made from the message's
encoded bytes (kept by ``sdk.encoded``), read here into :class:`Typed` values, each with the AMQP type
name the sender chose: ``null boolean ubyte ushort uint ulong byte short int long float double
decimal32 decimal64 decimal128 char timestamp uuid binary string symbol list map array described``.

A typed value's JSON form (``to_json`` / ``from_json``, the export file's) is ``{type: form}``: a
number, ``true``/``false``, text (strings, symbols, chars, a uuid, a timestamp in ISO 8601 with
milliseconds), base64 (binary), hex (decimals), ``"NaN"``/``"Infinity"`` for those doubles, a list of
nodes (list, array), a list of ``[key, value]`` node pairs (map), ``[descriptor, value]`` (described).
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidInputError

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Typed:
    """An AMQP value and its type. ``value``: a Python value for the primitive types (milliseconds
    since the epoch for a timestamp, the encoded bytes for a decimal), a list of ``Typed`` for a list
    or an array, a list of (key, value) pairs for a map, (descriptor, value) for a described value."""

    type: str
    value: Any


# Constructors of the fixed-width types: code -> (type, struct format or None for no payload).
_FIXED: dict[int, tuple[str, str | None]] = {
    0x40: ("null", None),
    0x56: ("boolean", ">?"),
    0x50: ("ubyte", ">B"),
    0x60: ("ushort", ">H"),
    0x70: ("uint", ">I"),
    0x52: ("uint", ">B"),
    0x80: ("ulong", ">Q"),
    0x53: ("ulong", ">B"),
    0x51: ("byte", ">b"),
    0x61: ("short", ">h"),
    0x71: ("int", ">i"),
    0x54: ("int", ">b"),
    0x81: ("long", ">q"),
    0x55: ("long", ">b"),
    0x72: ("float", ">f"),
    0x82: ("double", ">d"),
    0x83: ("timestamp", ">q"),
}
_CONSTANTS = {0x41: Typed("boolean", True), 0x42: Typed("boolean", False), 0x43: Typed("uint", 0)}
_CONSTANTS |= {0x44: Typed("ulong", 0), 0x45: Typed("list", [])}
_RAW = {0x74: ("decimal32", 4), 0x84: ("decimal64", 8), 0x94: ("decimal128", 16), 0x98: ("uuid", 16)}
_VARIABLE = {0xA0: "binary", 0xB0: "binary", 0xA1: "string", 0xB1: "string", 0xA3: "symbol", 0xB3: "symbol"}


def decode(buf: bytes | memoryview, pos: int = 0) -> tuple[Typed, int]:
    """The value encoded at ``buf[pos]`` and where it ends."""
    code = buf[pos]
    if code == 0x00:
        descriptor, pos = decode(buf, pos + 1)
        value, pos = decode(buf, pos)
        return Typed("described", (descriptor, value)), pos
    return _payload(buf, pos + 1, code)


def _payload(buf: bytes | memoryview, pos: int, code: int) -> tuple[Typed, int]:
    """The value after constructor ``code`` (an array's elements share one constructor)."""
    if code in _CONSTANTS:
        return _CONSTANTS[code], pos
    if code in _FIXED:
        name, fmt = _FIXED[code]
        if fmt is None:
            return Typed(name, None), pos
        (value,) = struct.unpack_from(fmt, buf, pos)
        return Typed(name, value), pos + struct.calcsize(fmt)
    if code in _RAW:
        name, width = _RAW[code]
        raw = bytes(buf[pos : pos + width])
        return Typed(name, uuid.UUID(bytes=raw) if name == "uuid" else raw), pos + width
    if code == 0x73:
        (point,) = struct.unpack_from(">I", buf, pos)
        return Typed("char", chr(point)), pos + 4
    wide = code >> 4 in (0xB, 0xD, 0xF)
    size, count_at = (struct.unpack_from(">I", buf, pos)[0], pos + 4) if wide else (buf[pos], pos + 1)
    end = count_at + size
    if code in _VARIABLE:
        raw = bytes(buf[count_at:end])
        return Typed(_VARIABLE[code], raw if code in (0xA0, 0xB0) else raw.decode("utf-8")), end
    count = struct.unpack_from(">I", buf, count_at)[0] if wide else buf[count_at]
    at = count_at + (4 if wide else 1)
    if code in (0xC0, 0xD0, 0xC1, 0xD1):
        items = []
        for _ in range(count):
            item, at = decode(buf, at)
            items.append(item)
        if code in (0xC0, 0xD0):
            return Typed("list", items), end
        return Typed("map", list(zip(items[::2], items[1::2], strict=True))), end
    if code in (0xE0, 0xF0):
        return Typed("array", _elements(buf, at, count)), end
    raise InvalidInputError(f"Not an AMQP value: constructor 0x{code:02x}.")


def _elements(buf: bytes | memoryview, at: int, count: int) -> list[Typed]:
    descriptor = None
    if buf[at] == 0x00:
        descriptor, at = decode(buf, at + 1)
    code, at = buf[at], at + 1
    out = []
    for _ in range(count):
        item, at = _payload(buf, at, code)
        out.append(item if descriptor is None else Typed("described", (descriptor, item)))
    return out


DATA, SEQUENCE, VALUE, APPLICATION_PROPERTIES, PROPERTIES = 0x75, 0x76, 0x77, 0x74, 0x73
# The properties section's fields that are AMQP message ids (a ulong, uuid, binary or string): by position.
ID_FIELDS = {"message_id": 0, "correlation_id": 5}


@dataclass
class TypedMessage:
    """What a copy keeps with its type: the body (``kind`` ``data``: its sections' bytes; ``value``:
    one value; ``sequence``: its sections, each a list; ``none``: no body section) and the application
    properties."""

    kind: str = "none"
    data: list[bytes] = field(default_factory=list)
    value: Typed | None = None
    sequence: list[list[Typed]] = field(default_factory=list)
    properties: dict[str, Typed] = field(default_factory=dict)
    # ``message_id`` and ``correlation_id`` (``ID_FIELDS``) that are set, each with its type: the SDK
    # hands a string id and a binary one back alike, and the kit's records hold either as text.
    ids: dict[str, Typed] = field(default_factory=dict)


def read_message(encoded: bytes | memoryview) -> TypedMessage:
    """The body, application properties and ids of an encoded message; the other sections (header,
    annotations, footer) and the other properties are not kept: a copy reads them from the SDK."""
    out = TypedMessage()
    pos, end = 0, len(encoded)
    while pos < end:
        if encoded[pos + 1] == 0x53:  # the section's descriptor: a small ulong, as every SDK writes it
            code, start = encoded[pos + 2], pos + 3
        else:
            descriptor, start = decode(encoded, pos + 1)
            code = descriptor.value
        if code == DATA:
            value, pos = decode(encoded, start)
            out.kind = "data"
            out.data.append(value.value)
        elif code == SEQUENCE:
            value, pos = decode(encoded, start)
            out.kind = "sequence"
            out.sequence.append(list(value.value))
        elif code == VALUE:
            out.value, pos = decode(encoded, start)
            out.kind = "value"
        elif code == APPLICATION_PROPERTIES:
            value, pos = decode(encoded, start)
            if value.type == "map":
                out.properties = {str(k.value): v for k, v in value.value}
        elif code == PROPERTIES:
            out.ids = _ids(encoded, start)
            pos = skip(encoded, start)
        else:
            pos = skip(encoded, start)
    return out


def _ids(buf: bytes | memoryview, pos: int) -> dict[str, Typed]:
    """The ``ID_FIELDS`` of the properties list encoded at ``pos`` that are set; the fields between
    them are stepped over (a copy reads a page of these: only the two ids are decoded)."""
    code = buf[pos]
    if code == 0xC0:  # list8: size, count
        count, at = buf[pos + 2], pos + 3
    elif code == 0xD0:  # list32
        count, at = struct.unpack_from(">I", buf, pos + 5)[0], pos + 9
    else:  # an empty list: no field set
        return {}
    wanted = {i: name for name, i in ID_FIELDS.items()}
    out: dict[str, Typed] = {}
    for i in range(min(count, max(wanted) + 1)):
        if i not in wanted:
            at = skip(buf, at)
            continue
        value, at = decode(buf, at)
        if value.type != "null":
            out[wanted[i]] = value
    return out


_WIDTHS = {0x4: 0, 0x5: 1, 0x6: 2, 0x7: 4, 0x8: 8, 0x9: 16}  # fixed-width constructors by high nibble


def skip(buf: bytes | memoryview, pos: int) -> int:
    """Where the value encoded at ``buf[pos]`` ends, without decoding it."""
    code = buf[pos]
    if code == 0x00:
        return skip(buf, skip(buf, pos + 1))
    high = code >> 4
    if high in _WIDTHS:
        return pos + 1 + _WIDTHS[high]
    if high in (0xA, 0xC, 0xE):
        return pos + 2 + buf[pos + 1]
    if high in (0xB, 0xD, 0xF):
        return pos + 5 + struct.unpack_from(">I", buf, pos + 1)[0]
    raise InvalidInputError(f"Not an AMQP value: constructor 0x{code:02x}.")


def plain(t: Typed) -> Any:
    """A typed value as the plain Python value a reader expects (what the SDK would hand back, but a
    timestamp as a datetime and strings as text)."""
    if t.type in ("list", "array"):
        return [plain(v) for v in t.value]
    if t.type == "map":
        return {_hashable(plain(k)): plain(v) for k, v in t.value}
    if t.type == "described":
        return plain(t.value[1])
    if t.type == "timestamp":
        return EPOCH + dt.timedelta(milliseconds=t.value)
    return t.value


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else str(value) if isinstance(value, dict) else value


_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def form(t: Typed) -> Any:
    """The JSON form of a typed value's content (see the module docstring)."""
    kind, value = t.type, t.value
    if kind in ("list", "array"):
        return [to_json(v) for v in value]
    if kind == "map":
        return [[to_json(k), to_json(v)] for k, v in value]
    if kind == "described":
        return [to_json(value[0]), to_json(value[1])]
    if kind == "timestamp":
        return (EPOCH + dt.timedelta(milliseconds=value)).isoformat(timespec="milliseconds")
    if kind == "binary":
        return base64.b64encode(value).decode()
    if kind.startswith("decimal"):
        return value.hex()
    if kind == "uuid":
        return str(value)
    if kind in ("float", "double") and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def to_json(t: Typed) -> dict[str, Any]:
    return {t.type: form(t)}


def from_form(kind: str, value: Any) -> Typed:
    """A typed value from its type name and JSON form (``form``'s inverse)."""
    reader = _READERS.get(kind)
    if reader is None:
        raise InvalidInputError(f"{kind!r} is not an AMQP type name.")
    try:
        return Typed(kind, reader(value))
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        raise InvalidInputError(f"{value!r} is not the JSON form of an AMQP {kind} ({exc}).") from None


def from_json(node: Any) -> Typed:
    if not isinstance(node, dict) or len(node) != 1:
        raise InvalidInputError(f"{node!r} is not a typed AMQP value (one {{type: value}} pair).")
    ((kind, value),) = node.items()
    return from_form(kind, value)


def _timestamp(text: str) -> int:
    return (dt.datetime.fromisoformat(text) - EPOCH) // dt.timedelta(milliseconds=1)


def _number(value: Any) -> float:
    return _NON_FINITE[value] if isinstance(value, str) else float(value)


def _whole(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("not a whole number")
    return value


def _of(kind: type) -> Callable[[Any], Any]:
    def read(value: Any) -> Any:
        if not isinstance(value, kind):
            raise TypeError(f"not a {kind.__name__}")
        return value

    return read


_READERS: dict[str, Callable[[Any], Any]] = {
    "null": lambda v: None,
    "boolean": _of(bool),
    **dict.fromkeys(("ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long"), _whole),
    "float": _number,
    "double": _number,
    **dict.fromkeys(("decimal32", "decimal64", "decimal128"), bytes.fromhex),
    "char": _of(str),
    "timestamp": _timestamp,
    "uuid": uuid.UUID,
    "binary": lambda v: base64.b64decode(v, validate=True),
    "string": _of(str),
    "symbol": _of(str),
    "list": lambda v: [from_json(n) for n in v],
    "array": lambda v: [from_json(n) for n in v],
    "map": lambda v: [(from_json(k), from_json(x)) for k, x in v],
    "described": lambda v: (from_json(v[0]), from_json(v[1])),
}
