"""The broker as a pure state machine: the facade that wires entities, locks, sessions, timers,
scheduling, rules and durability together, and moves messages between them.

No sockets, no threads of its own, no wall clock: every operation reads the
injected clock, and ``tick()`` fires what has fallen due (lock expiry, scheduled
messages, TTL, session locks). The AMQP layer maps frames onto these methods;
tests can drive them directly with a ``ManualClock``.

Pieces (each readable and testable alone):
``entities.py`` queues/topics/subscriptions and their stores; ``locks.py`` peek
locks; ``sessions.py`` session locks and state; ``timers.py`` due times;
``scheduling.py`` scheduled and deferred messages; ``filters.py`` subscription
rules and actions; ``durability.py`` + ``journal.py`` ``--data-dir``.

Rules followed (Azure Service Bus):
- peek-lock locks for the entity's LockDuration; abandon and lock expiry raise
  the delivery count; release (a client giving back an unwanted prefetch) does not;
  a receiver going away leaves its locks to expire or be settled by token;
- a delivery count reaching MaxDeliveryCount moves the message to the dead-letter
  queue with reason ``MaxDeliveryCountExceeded``;
- deferred messages leave the receive path and come back only by sequence number;
- expired messages are dropped, or dead-lettered with ``TTLExpiredException``
  when DeadLetteringOnMessageExpiration is set; dead-letter queues never expire;
- duplicate detection drops a message whose id was seen within the window;
- ForwardTo / ForwardDeadLetteredMessagesTo move messages on arrival;
- each queue and topic numbers its messages from 1.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

from . import scheduling
from .clock import Clock, SystemClock
from .entities import Entity, Queue, Receivable, Registry, Source, Subscription, Topic, scheduled_store, stores_of
from .errors import BadRequest, EntityNotFound, MessageSizeExceeded, NotAllowed
from .faults import FaultError, Faults, InjectedFailure
from .filters import Rule
from .journal import Journal
from .locks import Lock, LockTable
from .model import MessageData, MessageState, StoredMessage
from .recording import record, record_deleted
from .sessions import Sessions, session_store
from .store import MessageStore, SessionState
from .timers import LOCK, NEVER, SCHEDULED, SESSION, TTL, Timers
from .topology import EntityProperties, QueueConfig, SubscriptionConfig, TopicConfig, Topology, TopologyError

__all__ = ["Broker", "Entity", "Lock", "Queue", "Receivable", "Source", "Subscription", "Topic"]

DEAD_LETTER_REASON = "DeadLetterReason"
DEAD_LETTER_DESCRIPTION = "DeadLetterErrorDescription"
MAX_FORWARD_HOPS = 4  # Service Bus allows chains of at most four hops
MAX_BATCH_DELETE = 4000  # messages one batch-delete-messages request may ask for (Premium; Standard: 500)
PRUNE_INTERVAL = 60.0  # seconds between sweeps of the stored duplicate-detection history
_NOTHING_DIRTY: frozenset[MessageStore] = frozenset()

F = TypeVar("F", bound=Callable[..., Any])


def _locked(method: F) -> F:
    def wrapper(self: Broker, *args: Any, **kwargs: Any) -> Any:
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


class Broker:
    def __init__(self, topology: Topology, clock: Clock | None = None) -> None:
        self.journal: Journal | None = None  # attached after the topology is built and restored (durability.py)
        self.clock: Clock = clock or SystemClock()
        self.lock = threading.RLock()
        self.namespace = topology.namespace
        self.registry = Registry()
        self.locks = LockTable()
        self.sessions = Sessions()
        self.timers = Timers()
        self._dirty: set[MessageStore] = set()
        self.faults = Faults()
        self.restored = 0
        self.compacted_at_start = False
        self.restore_skipped = 0
        # Requests served, by kind ("com.microsoft:peek-message", "admin GET", ...) and messages peeked:
        # how a test tells how many round trips a client's action cost (Emulator.requests).
        self.requests: Counter[str] = Counter()
        self._next_prune = 0.0
        for q in topology.queues:
            self.add_queue(q)
        for t in topology.topics:
            self.add_topic(t)
        try:
            self.faults.load(topology.faults)
        except FaultError as exc:
            raise TopologyError(str(exc)) from None

    def attach_journal(self, journal: Journal) -> None:
        """Journal every change from now on (``durability.open_broker`` restores first)."""
        self.journal = journal
        for entity in self.registry:
            for store in stores_of(entity):
                store.journal = journal

    @property
    def _locks(self) -> dict[uuid.UUID, Lock]:
        """Live locks by token (tests read it)."""
        return self.locks.locks

    # ------------------------------------------------------ entity lifecycle

    def _attach(self, entity: Entity | Subscription) -> None:
        for store in stores_of(entity):
            store.journal = self.journal
        record(self.journal, entity)

    @_locked
    def add_queue(self, config: QueueConfig) -> Queue:
        queue = self.registry.add_queue(config)
        self._attach(queue)
        return queue

    @_locked
    def add_topic(self, config: TopicConfig) -> Topic:
        topic = self.registry.add_topic(config)
        self._attach(topic)
        for sub in config.subscriptions:
            self.add_subscription(config.name, sub)
        return topic

    @_locked
    def add_subscription(self, topic_name: str, config: SubscriptionConfig) -> Subscription:
        sub = self.registry.add_subscription(topic_name, config)
        self._attach(sub)
        return sub

    @_locked
    def delete_entity(self, name: str) -> None:
        """Delete a queue or topic (with its subscriptions) and every message in it."""
        entity = self.entity(name)
        self._drop_locks_in(stores_of(entity))
        self.registry.remove(entity)
        record_deleted(self.journal, entity)

    @_locked
    def delete_subscription(self, topic_name: str, name: str) -> None:
        sub = self.registry.subscription(topic_name, name)
        self._drop_locks_in(stores_of(sub))
        del sub.topic.subscriptions[sub.name.lower()]
        record_deleted(self.journal, sub)

    def _drop_locks_in(self, stores: list[MessageStore]) -> None:
        for lock in self.locks.in_stores(stores):
            self.locks.end(lock)
        for store in stores:  # removed one by one so that a journal forgets them too
            for seq in list(store.messages):
                store.remove(seq)

    @_locked
    def update_properties(self, entity: Entity | Subscription, props: EntityProperties) -> None:
        entity.props.__dict__.update(props.__dict__)
        record(self.journal, entity)

    @_locked
    def put_rule(self, sub: Subscription, rule: Rule) -> bool:
        """Add or replace a subscription rule; True if it replaced one."""
        for i, existing in enumerate(sub.rules):
            if existing.name.lower() == rule.name.lower():
                sub.rules[i] = rule
                record(self.journal, sub)
                return True
        sub.rules.append(rule)
        record(self.journal, sub)
        return False

    @_locked
    def delete_rule(self, sub: Subscription, name: str) -> None:
        existing = next((r for r in sub.rules if r.name.lower() == name.lower()), None)
        if existing is None:
            raise EntityNotFound(f"The rule '{name}' could not be found.", entity=sub.store.path)
        sub.rules.remove(existing)
        record(self.journal, sub)

    # ----------------------------------------------------------------- lookup

    @property
    def entities(self) -> list[Entity]:
        return list(self.registry)

    def entity(self, name: str) -> Entity:
        return self.registry.entity(name)

    @_locked
    def subscription(self, topic_name: str, name: str) -> Subscription:
        return self.registry.subscription(topic_name, name)

    def resolve_source(self, path: str) -> Source:
        """``q``, ``q/$DeadLetterQueue``, ``t/Subscriptions/s`` or its DLQ -> a Source."""
        return self.registry.resolve_source(path)

    def resolve_target(self, path: str) -> Entity:
        return self.registry.resolve_target(path)

    # ------------------------------------------------------------------- send

    @_locked
    def send(self, path: str, messages: list[MessageData]) -> list[int]:
        """Accept a message or a batch, all or nothing. Returns sequence numbers (0 = dropped duplicate)."""
        target = self.resolve_target(path)
        faults = self.faults.get(target.name)
        if faults is not None and (kind := faults.take_rejection()) is not None:
            raise InjectedFailure(kind, target.name)
        limit = target.props.max_message_size
        for data in messages:
            if data.size > limit:
                raise MessageSizeExceeded(
                    f"The received message (size {data.size} bytes) exceeds the limit "
                    f"({limit} bytes) currently allowed on the link.",
                    entity=target.name,
                )
            self._check_ids(data, target.name)
            if isinstance(target, Queue) and target.props.requires_session and data.session_id is None:
                raise NotAllowed(
                    "The SessionId was not set on a message, and it cannot be sent to the entity. Entities "
                    "that have session support enabled can only receive messages that have the SessionId set.",
                    entity=target.name,
                )
        now = self.clock.now()
        return [self._accept(target, data, now) for data in messages]

    @staticmethod
    def _check_ids(data: MessageData, entity: str) -> None:
        for name, value in (("MessageId", data.message_id), ("SessionId", data.session_id)):
            if value is not None and len(value) > 128:
                raise BadRequest(f"The {name} exceeds the maximum length of 128 characters.", entity=entity)

    def _number(self, target: Entity) -> int:
        seq = target.sequence.take()
        if self.journal is not None:
            self.journal.note_sequence(target.name, seq)
        return seq

    def _accept(self, target: Entity, data: MessageData, now: float) -> int:
        if target.duplicates is not None and data.message_id is not None:
            if target.duplicates.seen(data.message_id, now):
                return 0
            if self.journal is not None:
                self.journal.duplicate_seen(target.name, data.message_id, now)
        seq = self._number(target)
        msg = StoredMessage(
            data=data,
            sequence_number=seq,
            enqueued_time=now,
            enqueue_sequence_number=seq,
        )
        if data.scheduled_enqueue_time is not None and data.scheduled_enqueue_time > now:
            msg.state = MessageState.SCHEDULED
            msg.enqueued_time = data.scheduled_enqueue_time
            scheduled_store(target).add(msg)
            self.timers.add(data.scheduled_enqueue_time, SCHEDULED, (target, seq))
            return seq
        self._enqueue(target, msg, now, hops=0)
        return seq

    def _enqueue(self, target: Entity, msg: StoredMessage, now: float, hops: int) -> None:
        if isinstance(target, Topic):
            for sub in target.subscriptions.values():
                for copy in sub.admit(msg, lambda: self._number(target)):
                    self._arrive(sub, copy, now, hops)
        else:
            self._arrive(target, msg, now, hops)

    def _arrive(self, entity: Receivable, msg: StoredMessage, now: float, hops: int) -> None:
        forward = entity.props.forward_to
        if forward and hops < MAX_FORWARD_HOPS:
            dest = self.entity(forward)
            self._enqueue(dest, msg.copy_for(self._number(dest), now), now, hops + 1)
            return
        ttl = entity.props.default_message_ttl
        if msg.data.ttl is not None:
            ttl = min(ttl, msg.data.ttl)
        msg.expires_at = msg.enqueued_time + ttl
        entity.store.add(msg)
        self._dirty.add(entity.store)
        if msg.expires_at < now + NEVER:
            self.timers.add(msg.expires_at, TTL, (entity, msg.sequence_number))

    # -------------------------------------------------- schedule and deferral

    @_locked
    def schedule(self, path: str, messages: list[MessageData]) -> list[int]:
        """The ``schedule-message`` management operation."""
        scheduling.check_schedulable(self.resolve_target(path), messages)
        return self.send(path, messages)

    @_locked
    def cancel_scheduled(self, path: str, sequence_numbers: Iterable[int]) -> None:
        scheduling.cancel(self.resolve_target(path), sequence_numbers)

    @_locked
    def receive_deferred(
        self, source: Source, sequence_numbers: Iterable[int], *, peek_lock: bool, owner: object | None = None
    ) -> list[StoredMessage]:
        found = scheduling.deferred(source, sequence_numbers)
        now = self.clock.now()
        for msg in found:
            if peek_lock:
                self._lock(source, msg, now, owner)
            else:
                source.store.remove(msg.sequence_number)
        return found

    # ---------------------------------------------------------------- receive

    @_locked
    def receive(
        self,
        source: Source,
        max_count: int,
        *,
        peek_lock: bool,
        owner: object | None = None,
        session_id: str | None = None,
    ) -> list[StoredMessage]:
        """Take up to ``max_count`` available messages: locked (peek-lock) or removed.
        On a session-enabled entity, ``session_id`` names a session the caller holds."""
        self._reject_forwarding(source)
        now = self.clock.now()
        out: list[StoredMessage] = []
        store = source.store
        session = self.sessions.held(source, session_id, owner) if session_id is not None else None
        if session is None and store.sessions is not None:
            raise NotAllowed(
                "It is not possible for an entity that requires sessions to create a non-sessionful message receiver.",
                entity=store.path,
            )
        while len(out) < max_count:
            msg = store.take_available(session_id)
            if msg is None:
                break
            if msg.expires_at is not None and msg.expires_at <= now and not store.is_dead_letter:
                self._expire(source.entity, store, msg)
                continue
            if peek_lock:
                self._lock(source, msg, now, owner, session)
            else:
                store.remove(msg.sequence_number)
            out.append(msg)
        return out

    def _reject_forwarding(self, source: Source) -> None:
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

    @_locked
    def peek(
        self, source: Source, from_sequence_number: int, count: int, session_id: str | None = None
    ) -> list[StoredMessage]:
        """Non-destructive: no lock, no delivery count change; includes deferred and scheduled."""
        if count <= 0:
            raise BadRequest("The message count must be positive.", entity=source.store.path)
        out: list[StoredMessage] = []
        for msg in source.store.iter_from(from_sequence_number):
            if session_id is not None and msg.data.session_id != session_id:
                continue
            out.append(msg)
            if len(out) >= count:
                break
        return out

    @_locked
    def batch_delete(
        self, source: Source, count: int, before: float | None = None, session_id: str | None = None
    ) -> int:
        """The ``batch-delete-messages`` management operation: remove up to ``count`` of the oldest
        active messages enqueued before ``before`` (default: now), without delivering them.
        Locked messages are skipped, as are deferred and scheduled ones (they are not on the receive
        path); on a session-enabled entity, the named session's messages, or without a session id
        those of every session no receiver holds. Returns how many were removed."""
        store = source.store
        entity = source.entity
        if entity.props.enable_partitioning or (
            isinstance(entity, Subscription) and entity.topic.props.enable_partitioning
        ):
            raise NotAllowed("Batch delete is not supported on partitioned entities.", entity=store.path)
        if not 0 < count <= MAX_BATCH_DELETE:
            raise BadRequest(
                f"The message count {count} is out of range: ask for 1 to {MAX_BATCH_DELETE} messages.",
                entity=store.path,
            )
        if session_id is not None and store.sessions is None:
            raise BadRequest(
                f"A session id was given, but '{store.path}' does not require sessions.", entity=store.path
            )
        cutoff = float("inf") if before is None else before  # none given: now, i.e. every message there is
        doomed = store.take_for_deletion(count, cutoff, session_id, skip_session=lambda s: s.owner is not None)
        for msg in doomed:
            store.remove(msg.sequence_number)
        return len(doomed)

    # ------------------------------------------------------------- settlement

    def _let_go(
        self, token: uuid.UUID, properties: dict[str, Any] | None, store: MessageStore | None
    ) -> tuple[Lock, StoredMessage | None]:
        """End a lock for abandon/defer, applying the properties to modify."""
        lock = self.locks.held(token, store)
        msg = self.locks.end(lock)
        if msg is not None and properties:
            msg.writable_properties().update(properties)
        return lock, msg

    @_locked
    def complete(self, token: uuid.UUID, store: MessageStore | None = None) -> None:
        lock = self.locks.held(token, store)
        self.locks.end(lock)
        lock.store.remove(lock.seq)

    @_locked
    def abandon(
        self, token: uuid.UUID, properties: dict[str, Any] | None = None, store: MessageStore | None = None
    ) -> None:
        lock, msg = self._let_go(token, properties, store)
        if msg is not None:
            self._count_failed_delivery(lock.entity, lock.store, msg)

    @_locked
    def defer(
        self, token: uuid.UUID, properties: dict[str, Any] | None = None, store: MessageStore | None = None
    ) -> None:
        lock, msg = self._let_go(token, properties, store)
        if msg is not None:
            lock.store.set_state(msg, MessageState.DEFERRED)

    @_locked
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
        self._move_to_dead_letter(lock.entity, lock.store, msg, reason, description)

    @_locked
    def release(self, token: uuid.UUID) -> None:
        """Give a lock back without counting a delivery (AMQP ``released``)."""
        lock = self.locks.get(token)
        if lock is None:
            return
        msg = self.locks.end(lock)
        if msg is not None and msg.state is MessageState.ACTIVE:
            lock.store.mark_available(msg)
            self._dirty.add(lock.store)

    @_locked
    def release_owner(self, owner: object) -> int:
        """A link or connection went away. As on Service Bus, its message locks stay until they
        expire (then count a delivery attempt) or are settled by lock token, e.g. through
        ``update-disposition`` from another receiver. A session it held is released at once,
        and with it the locks of that session's messages. Returns how many message locks it held."""
        for session in self.sessions.owner_gone(owner):
            self._release_session(session)
        return self.locks.forget_owner(owner)

    @_locked
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
            out.append(msg.locked_until)
        return out

    @_locked
    def lose_locks(self, path: str) -> int:
        """Drop every lock held on a queue or subscription (and its DLQ), as a service update does:
        the messages are available again, delivery counts unchanged, and settling with the old
        lock fails with MessageLockLostError. Returns how many locks were lost."""
        source = self.resolve_source(path)
        lost = self.locks.in_stores([source.entity.store, source.entity.dead_letter])
        for lock in lost:
            msg = self.locks.end(lock)
            if msg is not None and msg.state is MessageState.ACTIVE:
                lock.store.mark_available(msg)
                self._dirty.add(lock.store)
        return len(lost)

    # ---------------------------------------------------------- dead-lettering

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
    ) -> None:
        store.remove(msg.sequence_number)
        msg.state = MessageState.ACTIVE
        if reason is not None:
            msg.writable_properties()[DEAD_LETTER_REASON] = reason
        if description is not None:
            msg.writable_properties()[DEAD_LETTER_DESCRIPTION] = description
        forward = entity.props.forward_dead_lettered_messages_to
        now = self.clock.now()
        if forward:
            dest = self.entity(forward)
            copy = msg.copy_for(self._number(dest), now)
            copy.dead_letter_source = entity.store.path
            copy.changed_properties = dict(msg.application_properties)
            self._enqueue(dest, copy, now, hops=1)
            return
        msg.expires_at = None
        entity.dead_letter.add(msg)
        self._dirty.add(entity.dead_letter)

    def _expire(self, entity: Receivable, store: MessageStore, msg: StoredMessage) -> None:
        if entity.props.dead_lettering_on_message_expiration:
            self._move_to_dead_letter(
                entity, store, msg, "TTLExpiredException", "The message expired and was dead lettered."
            )
        else:
            store.remove(msg.sequence_number)

    # ------------------------------------------------------------------ timers

    def next_due(self) -> float | None:
        return self.timers.next_due()

    @_locked
    def tick(self) -> None:
        """Fire every timer that has fallen due: lock expiry, schedules, TTL, session locks."""
        now = self.clock.now()
        for due, kind, key in self.timers.due(now):
            if kind == LOCK:
                self._fire_lock(key, due)
            elif kind == SCHEDULED:
                self._fire_scheduled(key[0], key[1], now)
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
        self._count_failed_delivery(lock.entity, lock.store, msg)

    def _fire_scheduled(self, target: Entity, seq: int, now: float) -> None:
        store = scheduled_store(target)
        msg = store.messages.get(seq)
        if msg is None or msg.state is not MessageState.SCHEDULED:
            return  # cancelled
        msg.enqueued_time = now
        store.remove(seq)  # a queue re-adds it as active; a topic fans it out
        msg.state = MessageState.ACTIVE
        self._enqueue(target, msg, now, hops=0)

    def _fire_ttl(self, entity: Receivable, seq: int, now: float) -> None:
        msg = entity.store.messages.get(seq)
        if msg is None or msg.expires_at is None or msg.expires_at > now:
            return
        if msg.locked:
            return  # a locked message expires when its lock ends (checked on unlock)
        self._expire(entity, entity.store, msg)

    # --------------------------------------------------------------- sessions

    @_locked
    def accept_session(self, source: Source, session_id: str | None, owner: object) -> SessionState | None:
        """Lock a session for ``owner``: the named one, or the next with available messages.
        Returns None when ``session_id`` is None and no session is free (the caller may wait)."""
        session = self.sessions.accept(source, session_id, owner, self.clock.now())
        if session is not None:
            assert session.locked_until is not None
            self.timers.add(session.locked_until, SESSION, (source.entity, source.store, session.id))
        return session

    @_locked
    def renew_session_lock(self, source: Source, session_id: str) -> float:
        session = self.sessions.renew(source, session_id, self.clock.now())
        assert session.locked_until is not None
        for lock in self.locks.of_session(session):
            msg = lock.store.messages.get(lock.seq)
            if msg is not None:
                msg.locked_until = session.locked_until
        self.timers.add(session.locked_until, SESSION, (source.entity, source.store, session.id))
        return session.locked_until

    def _release_session(self, session: SessionState, *, lapsed: bool = False) -> None:
        """The session's lock ends: its message locks end with it, each counting a delivery attempt."""
        now = self.clock.now()
        for lock in self.locks.of_session(session):
            msg = self.locks.end(lock)
            if lapsed:
                self.locks.session_lapsed(lock.token, now)
            if msg is not None:
                self._count_failed_delivery(lock.entity, lock.store, msg)
        self.sessions.released(session)

    @_locked
    def session_state(self, source: Source, session_id: str) -> bytes | None:
        return session_store(source).session(session_id).state

    @_locked
    def set_session_state(self, source: Source, session_id: str, state: bytes | None) -> None:
        store = self.sessions.set_state(source, session_id, state, self.clock.now())
        if self.journal is not None:
            self.journal.session_state(store.path, session_id, state)

    @_locked
    def list_sessions(self, source: Source, updated_after: float | None = None) -> list[str]:
        """Sessions with active messages or stored state (or state updated after a time)."""
        return self.sessions.listing(source, updated_after)

    def pop_dirty(self) -> set[MessageStore] | frozenset[MessageStore]:
        """Stores that gained available messages since the last call."""
        if not self._dirty:
            return _NOTHING_DIRTY
        with self.lock:
            dirty, self._dirty = self._dirty, set()
            return dirty

    # ------------------------------------------------------------------ counts

    @_locked
    def counts(self, path: str) -> dict[str, int]:
        """Active, dead-letter, scheduled and deferred counts for a queue or subscription."""
        source = self.resolve_source(path)
        store = source.entity.store
        return {
            "active": store.count(MessageState.ACTIVE),
            "deferred": store.count(MessageState.DEFERRED),
            "scheduled": store.count(MessageState.SCHEDULED),
            "dead_letter": len(source.entity.dead_letter),
        }
