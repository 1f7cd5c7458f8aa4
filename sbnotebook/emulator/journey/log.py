"""A message's journey, as the broker notes it: one event per thing that happened to a message.

Events are plain tuples (``JourneyEvent``), appended under the broker's lock to a bounded log: at
``MAX_EVENTS`` the oldest is dropped and counted (``dropped``), so a reader can say that the start
of a long journey is gone. Times are the broker's clock (a manual clock's in tests).

Delivery counts are as Service Bus and .NET count them: the first delivery is 1. (The AMQP header
the broker sends, which the Python SDK shows as ``delivery_count``, counts failed deliveries: one
less.)
"""

from __future__ import annotations

import sys
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple, TypedDict, Unpack

MAX_EVENTS = 100_000  # events kept; the oldest are dropped beyond this

# What can happen to a message, in the order of a typical journey.
ACCEPTED = "accepted"  # sent to a queue or topic and stored
SCHEDULED = "scheduled"  # sent with a scheduled enqueue time still ahead
CANCELLED = "cancelled"  # a scheduled message cancelled before its time
DUPLICATE_DROPPED = "duplicate_dropped"  # duplicate detection dropped it (its id seen in the window)
ENQUEUED = "enqueued"  # arrived in a subscription, a forward target, or at its scheduled time
DELIVERED = "delivered"  # locked and sent to a receiver (peek-lock)
RECEIVED_AND_DELETED = "received_and_deleted"  # sent to a receive-and-delete receiver: gone
LOCK_RENEWED = "lock_renewed"
LOCK_EXPIRED = "lock_expired"
LOCK_LOST = "lock_lost"  # ended by the broker (a service update, a session lock ended)
RELEASED = "released"  # given back unsettled (an unwanted prefetch): no delivery counted
COMPLETED = "completed"
ABANDONED = "abandoned"
DEFERRED = "deferred"
DEAD_LETTERED = "dead_lettered"
EXPIRED = "expired"  # its time to live ran out
FORWARDED = "forwarded"  # moved on by ForwardTo / ForwardDeadLetteredMessagesTo
BATCH_DELETED = "batch_deleted"  # removed unreceived (batch-delete-messages, the kit's purge on the server)

EVENTS = (
    ACCEPTED,
    SCHEDULED,
    CANCELLED,
    DUPLICATE_DROPPED,
    ENQUEUED,
    DELIVERED,
    RECEIVED_AND_DELETED,
    LOCK_RENEWED,
    LOCK_EXPIRED,
    LOCK_LOST,
    RELEASED,
    COMPLETED,
    ABANDONED,
    DEFERRED,
    DEAD_LETTERED,
    EXPIRED,
    FORWARDED,
    BATCH_DELETED,
)


class JourneyEvent(NamedTuple):
    """One thing that happened to one message."""

    number: int  # its place in the log, from 1 (a reader sees gaps where events were dropped)
    time: float  # the broker's clock, epoch seconds
    event: str  # one of EVENTS
    entity: str  # where: a queue, topic, subscription path, or a dead-letter queue's path
    sequence_number: int  # the message's number there (0: none given, as for a dropped duplicate)
    message_id: str | None
    delivery_count: int | None  # Service Bus's count: the first delivery is 1
    lock_token: uuid.UUID | None
    reason: str | None  # the dead-letter reason; why a lock was lost; how it was delivered
    description: str | None  # the dead-letter description; the lock's new expiry; the schedule
    to: str | None  # where it went: the forward target, the dead-letter queue, a subscription
    came_from: str | None  # where it came from: the topic, the entity that forwarded it
    traceparent: str | None  # the W3C trace context the message carries (traceparent, or Diagnostic-Id)
    original_message_id: str | None  # sbnotebook-original-message-id: the message this one is a copy of

    def as_dict(self) -> dict[str, object]:
        return self._asdict()


class EventDetail(TypedDict, total=False):
    """What an event says beyond where and which message (``JourneyEvent``'s fields of these names):
    the broker's ``_note`` and ``JourneyLog.note`` take them as keywords, typed here once."""

    delivery_count: int | None
    lock_token: uuid.UUID | None
    reason: str | None
    description: str | None
    to: str | None
    came_from: str | None


DETAIL = tuple(EventDetail.__annotations__)  # in JourneyEvent's order (a test holds them together)

Listener = Callable[[JourneyEvent], None]
TRACE_MODULE = "opentelemetry.trace"  # until a process has loaded it, no one can take a span


class JourneyLog:
    """The broker's journey events, oldest first, at most ``capacity`` of them.

    Kept as plain tuples (a ``JourneyEvent`` is made when one is read): noting an event is on the
    path of every send, delivery and settlement. Appended under the broker's lock; ``events()``
    copies the deque in one C call, which no append can interleave."""

    def __init__(self, capacity: int = MAX_EVENTS, listener: Listener | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"a journey log keeps at least one event, not {capacity}")
        self.capacity = capacity
        self._events: deque[tuple[Any, ...]] = deque(maxlen=capacity)
        self._next = 1
        self._modules = sys.modules
        # Told each event once OpenTelemetry's API is loaded in the process (spans.py)
        self.listener = listener

    @property
    def dropped(self) -> int:
        """Events dropped as the oldest, since the broker started."""
        return self._next - 1 - len(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def note(
        self,
        time: float,
        event: str,
        entity: str,
        sequence_number: int,
        message_id: str | None,
        traceparent: str | None = None,
        original_message_id: str | None = None,
        **detail: Unpack[EventDetail],
    ) -> None:
        said: tuple[Any, ...] = tuple(map(detail.get, DETAIL))
        row = (self._next, time, event, entity, sequence_number, message_id, *said, traceparent, original_message_id)
        self._next += 1
        self._events.append(row)
        if TRACE_MODULE in self._modules and self.listener is not None:
            self.listener(JourneyEvent(*row))

    def events(self) -> list[JourneyEvent]:
        """Every event kept, oldest first."""
        return [JourneyEvent(*row) for row in list(self._events)]
