"""The SDK boundary at typed values: a received message's encoded bytes kept, typed values sent.

pyamqp decodes a received or peeked message into Python values that lose their AMQP types (an
``int`` and a ``long`` are both ``int``, a ``string`` and a ``binary`` both ``bytes``, a timestamp an
``int``), and the public SDK keeps nothing else. A copy must be the same message, so:

- ``keep_encoded``: the modules that decode received and peeked messages (``DECODE_CALLS``: the
  async receiver link, the transport's peek and deferred-receive parser) call ``decode_payload``
  through a wrapper that returns the same ``Message`` carrying the bytes it was decoded from; the
  values are the SDK's, unchanged (``encoded(msg)`` reads the bytes: ``amqp_codec`` reads types);
- ``sdk_value`` / ``value_body``: an ``amqp_codec.Typed`` value as pyamqp's encoder takes a typed
  value (``{TYPE: ..., VALUE: ...}``), for application properties and body sections.

``sdk.USED_BY`` lists the private names used here; tests/core/incidents/test_typed_copies.py pins the lines.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib
import uuid
from typing import Any

from ..amqp_codec import EPOCH, Typed
from ..errors import InvalidInputError

# Where the SDK decodes a message a receiver gets (the async link: the kit's receivers are async) or
# a peek or a deferred receive returns (the transport's parser): the lines calling the module's own
# ``decode_payload``, which ``keep_encoded`` wraps. tests/core/incidents/test_typed_copies.py fails when they change.
DECODE_CALLS: dict[str, tuple[str, ...]] = {
    "azure.servicebus._pyamqp.aio._receiver_async": (
        "message = decode_payload(memoryview(self._received_payload))",
        "message = decode_payload(frame[11])",
    ),
    "azure.servicebus._transport._pyamqp_transport": ('wrapped = decode_payload(memoryview(m[b"message"]))',),
}


@functools.cache
def _kept_type() -> type:
    from azure.servicebus._pyamqp.message import Message

    class KeptMessage(Message):
        """pyamqp's ``Message`` with the bytes it was decoded from (``_sbnotebook_encoded``)."""

    return KeptMessage


def _keeping(decode: Any) -> Any:
    kept = _kept_type()

    def decode_payload(buffer: Any) -> Any:
        message = kept(*decode(buffer))
        message._sbnotebook_encoded = bytes(buffer)
        return message

    decode_payload._sbnotebook_wraps = decode  # type: ignore[attr-defined]
    return decode_payload


@functools.cache
def keep_encoded() -> None:
    """From now on, messages received and peeked carry their encoded bytes (once per process)."""
    for name in DECODE_CALLS:
        module: Any = importlib.import_module(name)
        if not hasattr(module.decode_payload, "_sbnotebook_wraps"):
            module.decode_payload = _keeping(module.decode_payload)


def encoded(msg: Any) -> bytes | None:
    """The bytes a received or peeked message was decoded from; None when it was decoded before
    ``keep_encoded`` (or not by pyamqp)."""
    return getattr(getattr(msg, "_message", None), "_sbnotebook_encoded", None)


class Unsupported(InvalidInputError):
    """A typed value the SDK's encoder cannot write (the message is reported, never changed)."""


@functools.cache
def _names() -> tuple[str, str, Any]:
    """pyamqp's typed-value keys (the words ``TYPE`` and ``VALUE``) and its type names."""
    import azure.servicebus._pyamqp.types as amqp_types

    return amqp_types.TYPE, amqp_types.VALUE, amqp_types.AMQPTypes


_PRIMITIVES = frozenset(
    {
        *("null", "boolean", "ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long"),
        *("float", "double", "timestamp", "uuid", "binary", "string", "symbol"),
    }
)


def sdk_value(t: Typed) -> dict[str, Any]:
    """``t`` as pyamqp's encoder writes it with its own type; ``Unsupported`` for the types it has no
    encoder for (``char``, ``decimal32``, ``decimal64``; ``decimal128``, whose encoder rounds)."""
    type_key, value_key, types = _names()
    kind, value = t.type, t.value
    if kind in _PRIMITIVES:
        return {type_key: getattr(types, kind), value_key: value}
    if kind == "list":
        return {type_key: types.list, value_key: [sdk_value(v) for v in value]}
    if kind == "array":
        if not value:
            raise Unsupported("an empty AMQP array (the SDK's encoder writes it without its element type)")
        return {type_key: types.array, value_key: [sdk_value(v) for v in value]}
    if kind == "map":
        return {type_key: types.map, value_key: [(sdk_value(k), sdk_value(v)) for k, v in value]}
    if kind == "described":
        return {type_key: types.described, value_key: (sdk_value(value[0]), sdk_value(value[1]))}
    raise Unsupported(f"an AMQP {kind} value (the azure-servicebus SDK has no encoder for it)")


class _Key:
    """A typed map key the SDK's encoder reads as ``{TYPE: ..., VALUE: ...}``, hashable (a top-level
    map body is a Python dict)."""

    __slots__ = ("typed",)

    def __init__(self, typed: dict[str, Any]) -> None:
        self.typed = typed

    def __getitem__(self, key: str) -> Any:
        return self.typed[key]

    def __hash__(self) -> int:
        return id(self)


def value_body(t: Typed) -> Any:
    """An AMQP value body as the SDK's encoder takes it: it writes the body as an untyped Python
    value, so each type is given the Python value it writes with that type (typed values inside);
    ``Unsupported`` for a body it cannot write with its type (a top-level ``long``, say, or a value
    it drops as empty: ``null``, ``false``, ``0``, ``""``, an empty list or map)."""
    kind, value = t.type, t.value
    if kind in ("null", "boolean", "int", "double", "string", "binary", "uuid", "list", "map") and not value:
        raise Unsupported(f"an AMQP value body that is an empty or zero {kind} (the SDK's encoder leaves it out)")
    if kind == "map":
        return {_Key(sdk_value(k)): sdk_value(v) for k, v in value}
    if kind == "list":
        return [sdk_value(v) for v in value]
    if kind == "described":
        return (sdk_value(value[0]), sdk_value(value[1]))
    if kind == "timestamp":
        return EPOCH + dt.timedelta(milliseconds=value)
    if kind in ("boolean", "int", "double", "string", "binary") or (kind == "uuid" and isinstance(value, uuid.UUID)):
        return value
    raise Unsupported(f"an AMQP value body of type {kind} (the SDK's encoder writes it as another type)")
