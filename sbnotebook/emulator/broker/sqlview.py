"""A stored message as the SQL evaluator reads and changes it (``sbnotebook/sqlrules/context.py``'s interface):
its application properties (any case of a name), its ``sys.`` properties, and what an action sets.

An action setting ``sys.MessageId``, ``CorrelationId``, ``Label``, ``To``, ``ReplyTo``,
``ReplyToSessionId``, ``SessionId`` or ``ContentType`` rewrites the message's AMQP properties
section (the subscription's copy only); ``sys.TimeToLive`` its header's time to live. The other
``sys.`` properties Service Bus lets a sender set are refused when a rule sets them
(``UNSETTABLE``): the emulator does not apply them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Any

from proton import Data, Described, symbol

from ...sqlrules.context import MISSING
from .model import StoredMessage
from .sqlvalues import EPOCH, to_amqp, to_sql

# sys. name -> (MessageData field, index in the AMQP properties list)
_PROPERTIES_SECTION = {
    "MessageId": ("message_id", 0),
    "To": ("to", 2),
    "Label": ("subject", 3),
    "ReplyTo": ("reply_to", 4),
    "CorrelationId": ("correlation_id", 5),
    "ContentType": ("content_type", 6),
    "SessionId": ("session_id", 10),
    "ReplyToSessionId": ("reply_to_session_id", 12),
}
UNSETTABLE = frozenset({"ForcePersistence", "PartitionKey", "ScheduledEnqueueTimeUtc", "ViaPartitionKey"})


def _time(seconds: float | None) -> dt.datetime | None:
    return None if seconds is None else EPOCH + dt.timedelta(seconds=seconds)


def _expires(m: StoredMessage) -> dt.datetime | None:
    return None if m.data.ttl is None else _time(m.enqueued_time + m.data.ttl)


def _field(name: str) -> Callable[[StoredMessage], Any]:
    return lambda m: getattr(m.data, name)


_SYSTEM: dict[str, Callable[[StoredMessage], Any]] = {
    **{name: _field(field) for name, (field, _) in _PROPERTIES_SECTION.items()},
    "PartitionKey": lambda m: m.data.partition_key,
    "ViaPartitionKey": lambda m: None,
    "SequenceNumber": lambda m: m.sequence_number,
    "EnqueuedSequenceNumber": lambda m: m.enqueue_sequence_number or m.sequence_number,
    "EnqueuedTimeUtc": lambda m: _time(m.enqueued_time),
    "ExpiresAtUtc": _expires,
    "ScheduledEnqueueTimeUtc": lambda m: _time(m.data.scheduled_enqueue_time),
    "TimeToLive": lambda m: None if m.data.ttl is None else dt.timedelta(seconds=m.data.ttl),
    "DeliveryCount": lambda m: m.delivery_count,
    "Size": lambda m: m.data.size,
    "State": lambda m: m.state.name.capitalize(),
    "DeadLetterSource": lambda m: m.dead_letter_source,
    "LockToken": lambda m: m.lock_token,
    "LockedUntilUtc": lambda m: _time(m.locked_until),
    "ForcePersistence": lambda m: False,
}


def _properties_section(raw: bytes, index: int, value: Any) -> bytes:
    """The encoded AMQP properties section with field ``index`` replaced (other fields keep their types)."""
    fields: list[Any] = []
    if raw:
        d = Data()
        d.decode(raw)
        described: Any = d.get_object()
        fields = list(described.value or [])
    fields += [None] * (index + 1 - len(fields))
    fields[index] = symbol(value) if index == 6 and value is not None else value
    while fields and fields[-1] is None:
        fields.pop()
    out = Data()
    out.put_object(Described(0x73, fields))
    return bytes(out.encode())


class MessageView:
    """One message, for one round of rules (filters read it, actions change it)."""

    __slots__ = ("_names", "msg")

    def __init__(self, msg: StoredMessage) -> None:
        self.msg = msg
        self._names: dict[str, str] | None = None  # lower-case name -> the name as sent

    def _lowered(self) -> dict[str, str]:
        if self._names is None:
            self._names = {k.lower(): k for k in self.msg.application_properties}
        return self._names

    def user(self, lowered: str) -> Any:
        key = self._lowered().get(lowered)
        return MISSING if key is None else to_sql(self.msg.application_properties[key])

    def system(self, name: str) -> Any:
        return _SYSTEM[name](self.msg)

    def set_user(self, name: str, value: Any) -> None:
        self.remove_user(name)
        self.msg.writable_properties()[name] = to_amqp(value)
        self._lowered()[name.lower()] = name

    def remove_user(self, name: str) -> None:
        key = self._lowered().pop(name.lower(), None)
        if key is not None:
            del self.msg.writable_properties()[key]

    def set_system(self, name: str, value: Any) -> None:
        """Properties-section fields take text (or NULL: cleared); TimeToLive a TimeSpan. A value
        of another type changes nothing (docs/emulator.md)."""
        data = self.msg.data
        if name == "TimeToLive":
            if isinstance(value, dt.timedelta) or value is None:
                ttl = None if value is None else value.total_seconds()
                self.msg.data = dataclasses.replace(data, ttl=ttl)
            return
        field, index = _PROPERTIES_SECTION[name]
        if value is not None and not isinstance(value, str):
            return
        text = None if value is None else str(value)
        raw = _properties_section(data.raw_properties, index, text)
        changes: dict[str, Any] = {field: text, "raw_properties": raw}
        self.msg.data = dataclasses.replace(data, **changes)
