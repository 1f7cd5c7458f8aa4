"""Scheduled and deferred messages: the lookups behind schedule, cancel and receive-by-sequence-number.

A scheduled message is stored at once with its sequence number and state 2
(a queue in its own log, a topic before fan-out) and enqueued when it falls due, under a new
sequence number (firing.py), as Service Bus does.
A deferred message (state 1) leaves the receive path; only its sequence number
brings it back.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import BadRequest, MessageNotFound
from .entities import Entity, Source, scheduled_store
from .model import MessageData, MessageState, StoredMessage


def check_schedulable(target: Entity, messages: list[MessageData]) -> None:
    for data in messages:
        if data.scheduled_enqueue_time is None:
            raise BadRequest("Scheduled messages need a scheduled enqueue time.", entity=target.name)


def cancel(target: Entity, sequence_numbers: Iterable[int]) -> list[StoredMessage]:
    """Remove scheduled messages, all or none; those removed."""
    store = scheduled_store(target)
    seqs = list(sequence_numbers)
    for seq in seqs:
        msg = store.messages.get(seq)
        if msg is None or msg.state is not MessageState.SCHEDULED:
            raise MessageNotFound(
                f"The scheduled message with sequence number {seq} was not found.", entity=target.name
            )
    return [store.remove(seq) for seq in seqs]


def deferred(source: Source, sequence_numbers: Iterable[int]) -> list[StoredMessage]:
    """The deferred, unlocked messages with these numbers, all or none."""
    found = []
    for seq in sequence_numbers:
        msg = source.store.messages.get(seq)
        if msg is None or msg.state is not MessageState.DEFERRED or msg.locked:
            raise MessageNotFound(
                f"Failed to retrieve the deferred message with sequence number {seq}.", entity=source.store.path
            )
        found.append(msg)
    return found
