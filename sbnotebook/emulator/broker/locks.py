"""Peek locks: who holds which message, until when, and what settling by lock token finds.

A lock is taken when a message is delivered in peek-lock mode and ends when the
message is settled, the lock expires, its session lock ends, or the entity goes.
When the link or connection that took it goes away the lock stays (Service Bus
keeps it until it expires or someone settles it by token); only its owner is
forgotten.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import LockLost, SessionLockLost
from .entities import Receivable, Source
from .model import StoredMessage
from .store import MessageStore, SessionState

SESSION_LOST_MEMORY = 600.0  # seconds a lapsed session's tokens answer "session lock lost"


@dataclass
class Lock:
    token: uuid.UUID
    store: MessageStore
    entity: Receivable
    seq: int
    owner: object | None
    session: SessionState | None = None


class LockTable:
    def __init__(self) -> None:
        self.locks: dict[uuid.UUID, Lock] = {}
        self._owned: dict[object, set[uuid.UUID]] = {}
        self._session_lost: dict[uuid.UUID, float] = {}  # tokens whose session lock lapsed, and when

    def __len__(self) -> int:
        return len(self.locks)

    def take(self, source: Source, msg: StoredMessage, owner: object | None, session: SessionState | None) -> uuid.UUID:
        """Lock ``msg`` (the caller sets ``locked_until`` and its expiry timer)."""
        token = uuid.uuid4()
        msg.lock_token = token
        msg.lock_owner = owner
        self.locks[token] = Lock(token, source.store, source.entity, msg.sequence_number, owner, session)
        if owner is not None:
            self._owned.setdefault(owner, set()).add(token)
        return token

    def end(self, lock: Lock) -> StoredMessage | None:
        """End a lock; returns the message if it is still stored."""
        del self.locks[lock.token]
        if lock.owner is not None:
            owned = self._owned.get(lock.owner)
            if owned is not None:
                owned.discard(lock.token)
        msg = lock.store.messages.get(lock.seq)
        if msg is not None:
            msg.lock_token = None
            msg.locked_until = None
            msg.lock_owner = None
        return msg

    def held(self, token: uuid.UUID, store: MessageStore | None = None) -> Lock:
        """The live lock for ``token`` (on ``store`` if given), or the error Service Bus answers."""
        lock = self.locks.get(token)
        if lock is None and token in self._session_lost:
            raise SessionLockLost(
                "The session lock has expired on the MessageSession. Accept a new MessageSession.",
                entity=store.path if store else None,
            )
        if lock is None or (store is not None and lock.store is not store):
            raise LockLost(
                "The lock supplied is invalid. Either the lock expired, or the message has "
                "already been removed from the queue.",
                entity=store.path if store else None,
            )
        return lock

    def get(self, token: uuid.UUID) -> Lock | None:
        return self.locks.get(token)

    def forget_owner(self, owner: object) -> int:
        """The owner (a link) went away: its locks stay until they expire or are settled by token."""
        tokens = self._owned.pop(owner, set())
        for token in tokens:
            lock = self.locks.get(token)
            if lock is not None:
                lock.owner = None
                msg = lock.store.messages.get(lock.seq)
                if msg is not None:
                    msg.lock_owner = None
        return len(tokens)

    def in_stores(self, stores: Iterable[MessageStore]) -> list[Lock]:
        wanted = set(stores)
        return [lk for lk in self.locks.values() if lk.store in wanted]

    def of_session(self, session: SessionState) -> list[Lock]:
        return [lk for lk in self.locks.values() if lk.session is session]

    def session_lapsed(self, token: uuid.UUID, now: float) -> None:
        self._session_lost[token] = now

    def forget_lapsed(self, now: float) -> None:
        if self._session_lost:
            for token, when in list(self._session_lost.items()):
                if when + SESSION_LOST_MEMORY < now:
                    del self._session_lost[token]
