"""Messages as the broker stores them. Protocol-neutral: the AMQP layer fills these in."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from .values import decode_application_properties


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
    # The sender's map, decoded: None until something reads it (``sent_properties``). A queue
    # message that is only stored and delivered keeps just the encoded section.
    application_properties: dict[str, Any] | None = None

    def sent_properties(self) -> dict[str, Any]:
        """The sender's application properties (decoded on first use, then kept; never written)."""
        if self.application_properties is None:
            object.__setattr__(
                self, "application_properties", decode_application_properties(self.raw_application_properties)
            )
        assert self.application_properties is not None
        return self.application_properties


@dataclass(eq=False, slots=True)
class StoredMessage:
    """A message in a store. Its application properties are the sender's until something changes
    them (``writable_properties``): then ``changed_properties`` holds the message's own map."""

    data: MessageData
    sequence_number: int
    enqueued_time: float
    state: MessageState = MessageState.ACTIVE
    delivery_count: int = 0
    changed_properties: dict[str, Any] | None = None  # None: as the sender sent them
    lock_token: uuid.UUID | None = None
    locked_until: float | None = None
    lock_owner: object | None = None
    expires_at: float | None = None
    dead_letter_source: str | None = None
    enqueue_sequence_number: int = 0

    @property
    def locked(self) -> bool:
        return self.lock_token is not None

    @property
    def application_properties(self) -> dict[str, Any]:
        """The current application properties (read only: change them through ``writable_properties``)."""
        return self.changed_properties if self.changed_properties is not None else self.data.sent_properties()

    def writable_properties(self) -> dict[str, Any]:
        """The application properties to change in place: the message's own copy from now on."""
        if self.changed_properties is None:
            self.changed_properties = dict(self.data.sent_properties())
        return self.changed_properties

    def copy_for(self, sequence_number: int, enqueued_time: float) -> StoredMessage:
        """A fresh copy for another entity (fan-out, forwarding)."""
        return StoredMessage(
            data=self.data,
            sequence_number=sequence_number,
            enqueued_time=enqueued_time,
            changed_properties=None if self.changed_properties is None else dict(self.changed_properties),
            dead_letter_source=self.dead_letter_source,
            enqueue_sequence_number=self.enqueue_sequence_number,
        )
