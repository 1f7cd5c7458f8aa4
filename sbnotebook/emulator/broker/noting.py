"""What the broker reads off a message for its journey (``journey/``): the trace context it carries,
the message it is a copy of, the delivery under way.

Reading them costs a search of the encoded application properties per event: the map is decoded
(once per message) only when it holds one of the names read here.
"""

from __future__ import annotations

from typing import Any

from .model import MessageData, StoredMessage

# The kit's names (core/tracing.py, core/operations/copies.py), copied: the emulator imports nothing
# from the kit. tests/emulator/broker/test_kit_names.py holds them equal.
TRACEPARENT = "traceparent"
DIAGNOSTIC_ID = "Diagnostic-Id"  # the SDK's older name for the same context
ORIGINAL_ID = "sbnotebook-original-message-id"  # the kit's resubmit, copy and import write it
_TRACEPARENT, _DIAGNOSTIC_ID, _ORIGINAL_ID = TRACEPARENT.encode(), DIAGNOSTIC_ID.encode(), ORIGINAL_ID.encode()


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("ascii", "replace")
    return str(value)


def carried(data: MessageData, changed: dict[str, Any] | None = None) -> tuple[str | None, str | None]:
    """(the trace context the message carries, the message id it is a copy of): from the properties
    as sent, or as settlement ``changed`` them."""
    if changed is None:
        raw = data.raw_application_properties
        # Three tests written out, on every event: any() over a generator costs more than they do
        if not raw or not (_TRACEPARENT in raw or _DIAGNOSTIC_ID in raw or _ORIGINAL_ID in raw):
            return None, None
    props = changed if changed is not None else data.sent_properties()
    context = props.get(TRACEPARENT) or props.get(DIAGNOSTIC_ID)
    return _text(context), _text(props.get(ORIGINAL_ID))


def delivery(msg: StoredMessage) -> int:
    """The delivery under way, as Service Bus counts it (the first is 1; the AMQP header says one less)."""
    return msg.delivery_count + 1
