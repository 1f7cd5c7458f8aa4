"""Messages as the broker stores them. Protocol-neutral: the AMQP layer fills these in."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

NO_ENTRIES: dict[Any, Any] = {}  # the one empty map messages without annotations or properties share (never written)


class MessageState(IntEnum):
    """Values of the ``x-opt-message-state`` annotation."""

    ACTIVE = 0
    DEFERRED = 1
    SCHEDULED = 2


@dataclass(frozen=True, slots=True)
class MessageData:
    """What a sender gave us. Sections the broker does not interpret stay encoded as sent.
    Slotted (no per-instance ``__dict__``): a million stored messages each save about 300 bytes."""

    raw_properties: bytes  # the encoded properties section (may be empty)
    raw_body: bytes  # the encoded body section(s) and footer, forwarded byte for byte
    size: int
    raw_application_properties: bytes = b""  # as sent; re-encoded only if settlement changed them
    raw_delivery_annotations: bytes = b""  # the sender's delivery-annotations map, encoded as sent
    durable: bool = False
    priority: int = 4
    annotations: dict[Any, Any] = field(default_factory=dict)  # sender's, minus broker-owned keys
    message_id: str | None = None
    correlation_id: str | None = None
    subject: str | None = None
    content_type: str | None = None
    to: str | None = None
    reply_to: str | None = None
    reply_to_session_id: str | None = None
    session_id: str | None = None
    partition_key: str | None = None
    ttl: float | None = None  # seconds, from the header
    scheduled_enqueue_time: float | None = None  # epoch seconds
    application_properties: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class StoredMessage:
    """A message in a store. ``application_properties`` is the sender's map itself until something
    changes it (``writable_properties``): a million unchanged messages keep one map each, not two."""

    data: MessageData
    sequence_number: int
    enqueued_time: float
    state: MessageState = MessageState.ACTIVE
    delivery_count: int = 0
    application_properties: dict[str, Any] = field(default_factory=dict)
    lock_token: uuid.UUID | None = None
    locked_until: float | None = None
    lock_owner: object | None = None
    expires_at: float | None = None
    dead_letter_source: str | None = None
    enqueue_sequence_number: int = 0

    @property
    def locked(self) -> bool:
        return self.lock_token is not None

    def writable_properties(self) -> dict[str, Any]:
        """The application properties to change in place: the message's own copy from now on."""
        props = self.application_properties
        if props is self.data.application_properties or props is NO_ENTRIES:
            self.application_properties = dict(props)
        return self.application_properties

    def _shared_properties(self) -> dict[str, Any]:
        """For a copy: the sender's map while unchanged (never written in place), else a copy."""
        props = self.application_properties
        return props if props is self.data.application_properties or props is NO_ENTRIES else dict(props)

    def copy_for(self, sequence_number: int, enqueued_time: float) -> StoredMessage:
        """A fresh copy for another entity (fan-out, forwarding)."""
        return StoredMessage(
            data=self.data,
            sequence_number=sequence_number,
            enqueued_time=enqueued_time,
            application_properties=self._shared_properties(),
            dead_letter_source=self.dead_letter_source,
            enqueue_sequence_number=self.enqueue_sequence_number,
        )
