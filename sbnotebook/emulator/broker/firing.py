"""What falls due on the clock: lock expiry, scheduled messages, time to live, session locks, and
the sweep of the stored duplicate-detection history (a part of ``broker.Broker``)."""

from __future__ import annotations

import uuid

from ..journey import log as events
from .brokercore import BrokerCore, locked
from .entities import Entity, Queue, Receivable, scheduled_store
from .model import MessageState
from .noting import delivery
from .timers import LOCK, SCHEDULED, SESSION, TTL

PRUNE_INTERVAL = 60.0  # seconds between sweeps of the stored duplicate-detection history


class Firing(BrokerCore):
    _next_prune: float

    def next_due(self) -> float | None:
        return self.timers.next_due()

    @locked
    def tick(self) -> None:
        """Fire every timer that has fallen due: lock expiry, schedules, TTL, session locks."""
        now = self.clock.now()
        for due, kind, key in self.timers.due(now):
            if kind == LOCK:
                self._fire_lock(key, due)
            elif kind == SCHEDULED:
                # Enqueued at its scheduled time, not when the tick saw it: a manual clock advanced a
                # day past it must not report the day's end (and its TTL runs from that time).
                self._fire_scheduled(key[0], key[1], due)
            elif kind == TTL:
                self._fire_ttl(key[0], key[1], now)
            elif kind == SESSION:
                session = self.sessions.lapsed(key[1], key[2], due)
                if session is not None:
                    self._release_session(session, lapsed=True)
        self.locks.forget_lapsed(now)
        if self.journal is not None and now >= self._next_prune:
            # Forget stored message ids that left the duplicate-detection window.
            self._next_prune = now + PRUNE_INTERVAL
            for target in self.registry:
                if target.duplicates is not None:
                    self.journal.prune_duplicates(target.name, now - target.duplicates.window)

    def _fire_lock(self, token: uuid.UUID, due: float) -> None:
        lock = self.locks.get(token)
        if lock is None:
            return
        msg = lock.store.messages.get(lock.seq)
        if msg is None or msg.locked_until != due:
            return  # renewed since, or gone
        self.locks.end(lock)
        self._note(events.LOCK_EXPIRED, lock.store.path, msg, due, delivery_count=delivery(msg), lock_token=token)
        self._count_failed_delivery(lock.entity, lock.store, msg)

    def _fire_scheduled(self, target: Entity, seq: int, at: float) -> None:
        store = scheduled_store(target)
        msg = store.messages.get(seq)
        if msg is None or msg.state is not MessageState.SCHEDULED:
            return  # cancelled
        store.remove(seq)  # a queue re-adds it as active; a topic fans it out
        msg.state = MessageState.ACTIVE
        # As Service Bus does: "appended to the queue as if it had been enqueued at the current
        # instant, which includes assigning a new SequenceNumber" (Microsoft's message-sequencing
        # page); the number it was scheduled under is gone (cancelling it finds nothing).
        msg.enqueued_time = at
        msg.sequence_number = self._number(target)
        if isinstance(target, Queue):  # a topic notes each subscription's copy as it fans out
            why = "its scheduled time came"
            self._note(events.ENQUEUED, target.name, msg, at, reason=why, description=f"scheduled as {seq}")
        self._enqueue(target, msg, at, hops=0)

    def _fire_ttl(self, entity: Receivable, seq: int, now: float) -> None:
        msg = entity.store.messages.get(seq)
        if msg is None or msg.expires_at is None or msg.expires_at > now:
            return
        if msg.locked:
            return  # a locked message expires when its lock ends (checked on unlock)
        self._expire(entity, entity.store, msg)
