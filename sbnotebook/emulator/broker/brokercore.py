"""The broker's shared state and how a message moves: numbering, arriving (forwarding, TTL),
locking, failed deliveries, dead-lettering and expiry. The operations (``broker.py``,
``settlement.py``, ``firing.py``, ``sessionlocks.py``) build on this base; ``broker.Broker``
is the one class that puts them together.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar, Unpack, cast

from ..errors import BadRequest
from ..journey import log as events
from ..journey.log import EventDetail, JourneyLog
from .clock import Clock
from .entities import Entity, Receivable, Registry, Source, Topic
from .faults import Faults
from .locks import Lock, LockTable
from .model import MessageState, StoredMessage
from .noting import carried, delivery
from .recorder import Recorder
from .sessions import Sessions
from .store import MessageStore, SessionState
from .timers import LOCK, NEVER, TTL, Timers

DEAD_LETTER_REASON = "DeadLetterReason"
DEAD_LETTER_DESCRIPTION = "DeadLetterErrorDescription"
MAX_FORWARD_HOPS = 4  # Service Bus allows chains of at most four hops

F = TypeVar("F", bound=Callable[..., Any])


def locked(method: F) -> F:
    """An operation of the broker: under its lock, and journaled before the caller acknowledges."""

    def wrapper(self: BrokerCore, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            try:
                return method(self, *args, **kwargs)
            finally:
                # Persist before the caller acknowledges anything (no-op without --data-dir).
                if self.journal is not None and self.journal.dirty:
                    self.journal.flush()

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return cast(F, wrapper)


class BrokerCore:
    """State set by ``Broker.__init__``; the methods every operation shares."""

    journal: Recorder | None
    clock: Clock
    lock: threading.RLock
    registry: Registry
    locks: LockTable
    sessions: Sessions
    timers: Timers
    faults: Faults
    requests: Counter[str]
    journey: JourneyLog
    _dirty: set[MessageStore]

    def _note_lock_lost(self, lock: Lock, msg: StoredMessage, why: str) -> None:
        """A lock that ended without a settlement (a session's, an entity's): the message's journey says why."""
        self._note(
            events.LOCK_LOST, lock.store.path, msg, delivery_count=delivery(msg), lock_token=lock.token, reason=why
        )

    def _note(
        self, event: str, where: str, msg: StoredMessage, at: float | None = None, **detail: Unpack[EventDetail]
    ) -> None:
        """``event`` happened to ``msg`` in ``where``, now or ``at`` (what fell due: its time), in its journey."""
        context, original = carried(msg.data, msg.changed_properties)
        now = self.clock.now() if at is None else at
        self.journey.note(now, event, where, msg.sequence_number, msg.data.message_id, context, original, **detail)

    def entity(self, name: str) -> Entity:
        return self.registry.entity(name)

    def resolve_source(self, path: str) -> Source:
        """``q``, ``q/$DeadLetterQueue``, ``t/Subscriptions/s`` or its DLQ -> a Source."""
        return self.registry.resolve_source(path)

    def resolve_target(self, path: str) -> Entity:
        return self.registry.resolve_target(path)

    def _number(self, target: Entity) -> int:
        seq = target.sequence.take()
        if self.journal is not None:
            self.journal.note_sequence(target.name, seq)
        return seq

    def _enqueue(self, target: Entity, msg: StoredMessage, now: float, hops: int, came_from: str | None = None) -> None:
        """``came_from``: the entity that moved it here (forwarding), noted as it arrives."""
        if isinstance(target, Topic):
            for sub in target.subscriptions.values():
                for copy in sub.admit(msg, lambda: self._number(target)):
                    self._note(events.ENQUEUED, sub.store.path, copy, came_from=came_from or target.name)
                    self._arrive(sub, copy, now, hops)
        else:
            if came_from is not None:
                self._note(events.ENQUEUED, target.name, msg, came_from=came_from)
            self._arrive(target, msg, now, hops)

    def _arrive(self, entity: Receivable, msg: StoredMessage, now: float, hops: int) -> None:
        forward = entity.props.forward_to
        if forward and hops < MAX_FORWARD_HOPS:
            dest = self.entity(forward)
            self._note(events.FORWARDED, entity.store.path, msg, to=dest.name)
            self._enqueue(dest, msg.copy_for(self._number(dest), now), now, hops + 1, came_from=entity.store.path)
            return
        ttl = entity.props.default_message_ttl
        if msg.data.ttl is not None:
            ttl = min(ttl, msg.data.ttl)
        msg.expires_at = msg.enqueued_time + ttl
        entity.store.add(msg)
        self._dirty.add(entity.store)
        if msg.expires_at < now + NEVER:
            self.timers.add(msg.expires_at, TTL, (entity, msg.sequence_number))

    def reject_forwarding(self, source: Source) -> None:
        if source.entity.props.forward_to and not source.is_dead_letter:
            raise BadRequest(
                f"Cannot receive from '{source.store.path}': it auto-forwards to '{source.entity.props.forward_to}'.",
                entity=source.store.path,
            )

    def _lock(
        self, source: Source, msg: StoredMessage, now: float, owner: object | None, session: SessionState | None = None
    ) -> None:
        token = self.locks.take(source, msg, owner, session)
        if session is not None:
            msg.locked_until = session.locked_until  # a session message is locked by its session's lock
            return
        msg.locked_until = now + source.entity.props.lock_duration
        self.timers.add(msg.locked_until, LOCK, token)

    def held(self, token: uuid.UUID, store: MessageStore | None = None) -> Lock:
        return self.locks.held(token, store)

    def _count_failed_delivery(self, entity: Receivable, store: MessageStore, msg: StoredMessage) -> None:
        msg.delivery_count += 1
        store.touch(msg)
        if not store.is_dead_letter and msg.delivery_count >= entity.props.max_delivery_count:
            self._move_to_dead_letter(
                entity,
                store,
                msg,
                "MaxDeliveryCountExceeded",
                f"Message could not be consumed after {entity.props.max_delivery_count} delivery attempts.",
            )
            return
        if msg.expires_at is not None and msg.expires_at <= self.clock.now() and not store.is_dead_letter:
            self._expire(entity, store, msg)
            return
        if msg.state is MessageState.ACTIVE:
            store.mark_available(msg)
            self._dirty.add(store)

    def _move_to_dead_letter(
        self,
        entity: Receivable,
        store: MessageStore,
        msg: StoredMessage,
        reason: str | None,
        description: str | None,
        lock_token: uuid.UUID | None = None,
    ) -> None:
        """``lock_token``: the lock of the receiver that dead-lettered it (its delivery is under way)."""
        forward = entity.props.forward_dead_lettered_messages_to
        self._note(
            events.DEAD_LETTERED,
            store.path,
            msg,
            delivery_count=(msg.delivery_count or None) if lock_token is None else delivery(msg),
            lock_token=lock_token,
            reason=reason,
            description=description,
            to=forward or entity.dead_letter.path,
        )
        store.remove(msg.sequence_number)
        msg.state = MessageState.ACTIVE
        if reason is not None:
            msg.writable_properties()[DEAD_LETTER_REASON] = reason
        if description is not None:
            msg.writable_properties()[DEAD_LETTER_DESCRIPTION] = description
        now = self.clock.now()
        if forward:
            dest = self.entity(forward)
            copy = msg.copy_for(self._number(dest), now)
            copy.dead_letter_source = entity.store.path
            copy.changed_properties = dict(msg.application_properties)
            self._enqueue(dest, copy, now, hops=1, came_from=entity.dead_letter.path)
            return
        msg.expires_at = None
        entity.dead_letter.add(msg)
        self._dirty.add(entity.dead_letter)

    def _expire(self, entity: Receivable, store: MessageStore, msg: StoredMessage) -> None:
        self._note(events.EXPIRED, store.path, msg, delivery_count=msg.delivery_count or None)
        if entity.props.dead_lettering_on_message_expiration:
            self._move_to_dead_letter(
                entity, store, msg, "TTLExpiredException", "The message expired and was dead lettered."
            )
        else:
            store.remove(msg.sequence_number)

    def _release_session(self, session: SessionState, *, lapsed: bool = False) -> None:
        """The session's lock ends: its message locks end with it, each counting a delivery attempt."""
        now = self.clock.now()
        for lock in self.locks.of_session(session):
            msg = self.locks.end(lock)
            if lapsed:
                self.locks.session_lapsed(lock.token, now)
            if msg is not None:
                why = "the session's lock lapsed" if lapsed else "the session was released"
                self._note_lock_lost(lock, msg, why)
                self._count_failed_delivery(lock.entity, lock.store, msg)
        self.sessions.released(session)
