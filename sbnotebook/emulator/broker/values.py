"""AMQP values as the broker keeps them: proton's decoded values copied out of its buffers, and
the one shared empty map. Shared by the message model, the codec and the journal rows."""

from __future__ import annotations

from typing import Any

from proton import Data

NO_ENTRIES: dict[Any, Any] = {}  # the one empty map messages without annotations or properties share (never written)


def copy_value(value: Any) -> Any:
    """proton hands out memoryviews for binary values: copy before they go stale."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {copy_value(k): copy_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_value(v) for v in value]
    return value


def section_value(encoded: bytes, start: int, end: int) -> Any:
    """The value of the described section encoded in ``encoded[start:end]``."""
    d = Data()
    d.decode(encoded[start:end])
    described = d.get_object()
    return getattr(described, "value", None)


def decode_application_properties(raw: bytes) -> dict[str, Any]:
    """An encoded application-properties section (as sent) -> its map."""
    if not raw:
        return NO_ENTRIES
    value = section_value(raw, 0, len(raw))
    return copy_value(dict(value)) if value else NO_ENTRIES
