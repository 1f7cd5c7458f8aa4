"""Settling locked messages: complete, abandon, defer, dead-letter, release, renew, and locks lost
or left behind by a receiver that went away (a part of ``broker.Broker``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from ..errors import BadRequest, NotAllowed
from ..journey import log as events
from .brokercore import BrokerCore, locked
from .locks import Lock
from .model import MessageState, StoredMessage
from .noting import delivery
from .sessions import session_store
from .store import MessageStore
from .timers import LOCK


class Settlement(BrokerCore):
    def _let_go(
        self, token: uuid.UUID, properties: dict[str, Any] | None, store: MessageStore | None, event: str
    ) -> tuple[Lock, StoredMessage | None]:
        """End a lock for abandon/defer, applying the properties to modify; ``event`` noted."""
        lock = self.locks.held(token, store)
        msg = self.locks.end(lock)
        if msg is not None:
            if properties:
                msg.writable_properties().update(properties)
            self._note(event, lock.store.path, msg, delivery_count=delivery(msg), lock_token=token)
        return lock, msg

    @locked
    def complete(self, token: uuid.UUID, store: MessageStore | None = None) -> None:
        lock = self.locks.held(token, store)
        msg = self.locks.end(lock)
        if msg is not None:
            self._note(events.COMPLETED, lock.store.path, msg, delivery_count=delivery(msg), lock_token=token)
        lock.store.remove(lock.seq)

    @locked
    def abandon(
        self, token: uuid.UUID, properties: dict[str, Any] | None = None, store: MessageStore | None = None
    ) -> None:
        """Give the message back (AMQP modified, delivery failed): available again at once, its
        delivery count raised; at the entity's max delivery count it is dead-lettered."""
        lock, msg = self._let_go(token, properties, store, events.ABANDONED)
        if msg is not None:
            self._count_failed_delivery(lock.entity, lock.store, msg)

    @locked
    def defer(
        self, token: uuid.UUID, properties: dict[str, Any] | None = None, store: MessageStore | None = None
    ) -> None:
        """Set the message aside (AMQP modified, undeliverable here): no receiver gets it again; only
        a receive by its sequence number does. Deferring does not raise its delivery count."""
        lock, msg = self._let_go(token, properties, store, events.DEFERRED)
        if msg is not None:
            lock.store.set_state(msg, MessageState.DEFERRED)

    @locked
    def dead_letter(
        self,
        token: uuid.UUID,
        reason: str | None = None,
        description: str | None = None,
        properties: dict[str, Any] | None = None,
        store: MessageStore | None = None,
    ) -> None:
        lock = self.locks.held(token, store)
        if lock.store.is_dead_letter:
            # Service Bus: "you can't dead-letter a message from a DLQ". The lock stays held.
            raise BadRequest(
                "Cannot dead-letter a message that is already in a dead-letter queue; complete or abandon it.",
                entity=lock.store.path,
            )
        msg = self.locks.end(lock)
        if msg is None:
            return
        if properties:
            msg.writable_properties().update(properties)
        self._move_to_dead_letter(lock.entity, lock.store, msg, reason, description, lock_token=token)

    @locked
    def release(self, token: uuid.UUID) -> None:
        """Give a lock back without counting a delivery (AMQP ``released``)."""
        lock = self.locks.get(token)
        if lock is None:
            return
        msg = self.locks.end(lock)
        if msg is not None:
            self._note(events.RELEASED, lock.store.path, msg, delivery_count=delivery(msg), lock_token=token)
        if msg is not None and msg.state is MessageState.ACTIVE:
            lock.store.mark_available(msg)
            self._dirty.add(lock.store)

    @locked
    def release_owner(self, owner: object) -> int:
        """A link or connection went away. As on Service Bus, its message locks stay until they
        expire (then count a delivery attempt) or are settled by lock token, e.g. through
        ``update-disposition`` from another receiver. A session it held is released at once,
        and with it the locks of that session's messages. Returns how many message locks it held."""
        for session in self.sessions.owner_gone(owner):
            self._release_session(session)
        return self.locks.forget_owner(owner)

    @locked
    def renew(self, tokens: Iterable[uuid.UUID], store: MessageStore | None = None) -> list[float]:
        now = self.clock.now()
        out = []
        for token in tokens:
            lock = self.locks.held(token, store)
            if lock.session is not None:
                raise NotAllowed(
                    "Messages of a session are locked by the session: renew the session lock instead.",
                    entity=lock.store.path,
                )
            msg = lock.store.messages[lock.seq]
            msg.locked_until = now + lock.entity.props.lock_duration
            self.timers.add(msg.locked_until, LOCK, token)
            self._note(events.LOCK_RENEWED, lock.store.path, msg, delivery_count=delivery(msg), lock_token=token)
            out.append(msg.locked_until)
        return out

    @locked
    def lose_locks(self, path: str) -> int:
        """Drop every lock held on a queue or subscription (and its DLQ), as a service update does:
        the messages are available again, delivery counts unchanged, and settling with the old
        lock fails with MessageLockLostError. Returns how many locks were lost."""
        source = self.resolve_source(path)
        lost = self.locks.in_stores([source.entity.store, source.entity.dead_letter])
        for lock in lost:
            msg = self.locks.end(lock)
            if msg is not None:
                self._note_lock_lost(lock, msg, "the entity's locks were lost")
            if msg is not None and msg.state is MessageState.ACTIVE:
                lock.store.mark_available(msg)
                self._dirty.add(lock.store)
        return len(lost)

    @locked
    def lose_session_locks(self, path: str) -> int:
        """End every session lock held on a session-enabled queue or subscription now, as when a
        session lock lapses or a service update moves the session: the session is free to accept
        again, its message locks end with it (each counting a delivery attempt), settling with them
        fails with SessionLockLostError, and the holder's next receive detaches its link with
        session-lock-lost. Returns how many session locks were lost."""
        source = self.resolve_source(path)
        store = session_store(source)
        assert store.sessions is not None
        lost = [s for s in store.sessions.values() if s.owner is not None]
        for session in lost:
            self.sessions.lost(session)
            self._release_session(session, lapsed=True)
        return len(lost)
