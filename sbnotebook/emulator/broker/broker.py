"""The broker as a pure state machine: the facade that wires entities, locks, sessions, timers,
scheduling, rules and durability together, and moves messages between them.

No sockets, no threads of its own, no wall clock: every operation reads the
injected clock, and ``tick()`` fires what has fallen due (lock expiry, scheduled
messages, TTL, session locks). The AMQP layer maps frames onto these methods;
tests can drive them directly with a ``ManualClock``.

Pieces (each readable and testable alone): ``brokercore.py`` the shared state and how a
message moves (arrival, locking, dead-lettering, expiry); ``settlement.py``, ``firing.py``
(timers) and ``sessionlocks.py`` the operations beside this module's; ``entities.py``
queues/topics/subscriptions and their stores; ``locks.py`` peek locks; ``sessions.py`` session
locks and state; ``timers.py`` due times; ``scheduling.py`` scheduled and deferred messages;
``rules.py`` subscription rules and actions; ``recorder.py`` what ``--data-dir`` keeps (told as it changes).

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
from collections.abc import Iterable
from datetime import UTC, datetime

from ..errors import BadRequest, EntityNotFound, MessageSizeExceeded, NotAllowed
from ..journey import log as events
from ..journey.log import JourneyLog
from ..journey.spans import emit
from ..topology import EntityProperties, QueueConfig, SubscriptionConfig, TopicConfig, Topology, TopologyError
from . import scheduling
from .brokercore import locked
from .clock import Clock, SystemClock
from .entities import Entity, Queue, Receivable, Registry, Source, Subscription, Topic, scheduled_store, stores_of
from .faults import FaultError, Faults, InjectedFailure
from .firing import Firing
from .locks import Lock, LockTable
from .model import MessageData, MessageState, StoredMessage
from .noting import carried, delivery
from .policies import EntityPolicyStore
from .recorder import Recorder, record, record_deleted
from .rules import Rule
from .sessionlocks import SessionLocks
from .sessions import Sessions
from .settlement import Settlement
from .status import check_can_receive, check_can_send
from .store import MessageStore
from .timers import SCHEDULED, Timers

__all__ = ["Broker", "Entity", "Lock", "Queue", "Receivable", "Source", "Subscription", "Topic"]

MAX_BATCH_DELETE = 4000  # messages one batch-delete-messages request may ask for (Premium; Standard: 500)
_NOTHING_DIRTY: frozenset[MessageStore] = frozenset()


class Broker(Settlement, Firing, SessionLocks, EntityPolicyStore):
    """The broker: entity lifecycle, send, receive, peek, batch delete and counts here; settlement,
    timers and session locks in their own modules, on the shared ``BrokerCore``."""

    def __init__(self, topology: Topology, clock: Clock | None = None) -> None:
        self.journal: Recorder | None = None  # attached after the topology is built and restored (durability.py)
        self.clock: Clock = clock or SystemClock()
        self.lock = threading.RLock()
        self.namespace = topology.namespace
        self.registry = Registry()
        self.locks = LockTable()
        self.sessions = Sessions()
        self.timers = Timers()
        self._dirty: set[MessageStore] = set()
        self._deleted: list[Entity | Subscription] = []  # until the AMQP face detaches their links
        self.faults = Faults()
        self.restored = 0
        self.compacted_at_start = False
        self.restore_skipped = 0
        # Requests served, by kind ("com.microsoft:peek-message", "admin GET", ...) and messages peeked:
        # how a test tells how many round trips a client's action cost (Emulator.requests).
        self.requests: Counter[str] = Counter()
        self._next_prune = 0.0
        # Each message's journey, kept for asking (Emulator.journey) and told to OpenTelemetry (spans.py)
        self.journey = JourneyLog(listener=emit)
        for q in topology.queues:
            self.add_queue(q)
        for t in topology.topics:
            self.add_topic(t)
        self._adopt_policies(topology)
        try:
            self.faults.load(topology.faults)
        except FaultError as exc:
            raise TopologyError(str(exc)) from None

    def attach_journal(self, journal: Recorder) -> None:
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

    @locked
    def add_queue(self, config: QueueConfig) -> Queue:
        queue = self.registry.add_queue(config)
        self._attach(queue)
        return queue

    @locked
    def add_topic(self, config: TopicConfig) -> Topic:
        topic = self.registry.add_topic(config)
        self._attach(topic)
        for sub in config.subscriptions:
            self.add_subscription(config.name, sub)
        return topic

    @locked
    def add_subscription(self, topic_name: str, config: SubscriptionConfig) -> Subscription:
        sub = self.registry.add_subscription(topic_name, config)
        self._attach(sub)
        return sub

    @locked
    def delete_entity(self, name: str) -> None:
        """Delete a queue or topic (with its subscriptions) and every message in it."""
        entity = self.entity(name)
        self._drop_locks_in(stores_of(entity))
        self.registry.remove(entity)
        record_deleted(self.journal, entity)
        self._deleted.append(entity)
        if isinstance(entity, Topic):
            self._deleted.extend(entity.subscriptions.values())

    @locked
    def delete_subscription(self, topic_name: str, name: str) -> None:
        sub = self.registry.subscription(topic_name, name)
        self._drop_locks_in(stores_of(sub))
        del sub.topic.subscriptions[sub.name.lower()]
        record_deleted(self.journal, sub)
        self._deleted.append(sub)

    def _drop_locks_in(self, stores: list[MessageStore]) -> None:
        for lock in self.locks.in_stores(stores):
            self.locks.end(lock)
        for store in stores:  # removed one by one so that a journal forgets them too
            for seq in list(store.messages):
                store.remove(seq)

    @locked
    def update_properties(self, entity: Entity | Subscription, props: EntityProperties) -> None:
        entity.props.__dict__.update(props.__dict__)
        record(self.journal, entity)

    @locked
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

    @locked
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

    @locked
    def subscription(self, topic_name: str, name: str) -> Subscription:
        return self.registry.subscription(topic_name, name)

    # ------------------------------------------------------------------- send

    @locked
    def send(self, path: str, messages: list[MessageData]) -> list[int]:
        """Accept a message or a batch, all or nothing. Returns sequence numbers (0 = dropped duplicate)."""
        target = self.resolve_target(path)
        check_can_send(target, self.namespace)
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

    def _accept(self, target: Entity, data: MessageData, now: float) -> int:
        if target.duplicates is not None and data.message_id is not None:
            if target.duplicates.seen(data.message_id, now):
                self.journey.note(now, events.DUPLICATE_DROPPED, target.name, 0, data.message_id, *carried(data))
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
            self._note(events.SCHEDULED, target.name, msg, description=f"for {_stamp(msg.enqueued_time)}")
            return seq
        self._note(events.ACCEPTED, target.name, msg)
        self._enqueue(target, msg, now, hops=0)
        return seq

    # -------------------------------------------------- schedule and deferral

    @locked
    def schedule(self, path: str, messages: list[MessageData]) -> list[int]:
        """The ``schedule-message`` management operation."""
        scheduling.check_schedulable(self.resolve_target(path), messages)
        return self.send(path, messages)

    @locked
    def cancel_scheduled(self, path: str, sequence_numbers: Iterable[int]) -> None:
        target = self.resolve_target(path)
        for msg in scheduling.cancel(target, sequence_numbers):
            self._note(events.CANCELLED, target.name, msg)

    @locked
    def receive_deferred(
        self,
        source: Source,
        sequence_numbers: Iterable[int],
        *,
        peek_lock: bool,
        owner: object | None = None,
        session_id: str | None = None,
        holder: object | None = None,
    ) -> list[StoredMessage]:
        """The ``receive-by-sequence-number`` management operation. With ``session_id`` (a session
        receiver's request) the session must still be locked, by ``holder`` when given, else
        session-lock-lost and nothing is taken; the messages are then locked by the session's lock."""
        session = self.sessions.held(source, session_id, holder) if session_id is not None else None
        found = scheduling.deferred(source, sequence_numbers)
        now = self.clock.now()
        for msg in found:
            how = "by its sequence number (deferred)"
            if not peek_lock:
                self._note(
                    events.RECEIVED_AND_DELETED, source.store.path, msg, delivery_count=delivery(msg), reason=how
                )
                source.store.remove(msg.sequence_number)
                continue
            if session is not None:
                self._lock(source, msg, now, session.owner, session)
            else:
                self._lock(source, msg, now, owner)
            self._note(
                events.DELIVERED,
                source.store.path,
                msg,
                delivery_count=delivery(msg),
                lock_token=msg.lock_token,
                reason=how,
            )
        return found

    # ---------------------------------------------------------------- receive

    @locked
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
        self.reject_forwarding(source)
        check_can_receive(source.entity, self.namespace)
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
                self._note(events.DELIVERED, store.path, msg, delivery_count=delivery(msg), lock_token=msg.lock_token)
            else:
                self._note(events.RECEIVED_AND_DELETED, store.path, msg, delivery_count=delivery(msg))
                store.remove(msg.sequence_number)
            out.append(msg)
        return out

    @locked
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

    @locked
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
            self._note(events.BATCH_DELETED, store.path, msg)
            store.remove(msg.sequence_number)
        return len(doomed)

    def pop_dirty(self) -> set[MessageStore] | frozenset[MessageStore]:
        """Stores that gained available messages since the last call."""
        if not self._dirty:
            return _NOTHING_DIRTY
        with self.lock:
            dirty, self._dirty = self._dirty, set()
            return dirty

    def pop_deleted(self) -> list[Entity | Subscription]:
        """Entities deleted since the last call (a topic's subscriptions with it): the AMQP face
        detaches the links still attached to them, as Service Bus does."""
        if not self._deleted:
            return []
        with self.lock:
            deleted, self._deleted = self._deleted, []
            return deleted

    # ------------------------------------------------------------------ counts

    @locked
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


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
