"""The broker as a pure state machine: entities, messages, locks and timers.

No sockets, no threads of its own, no wall clock: every operation reads the
injected clock, and ``tick()`` fires what has fallen due (lock expiry, scheduled
messages, TTL). The AMQP layer maps frames onto these methods; tests can drive
them directly with a ``ManualClock``.

Rules followed (Azure Service Bus):
- peek-lock locks for the entity's LockDuration; abandon and lock expiry raise
  the delivery count; release (a client giving back an unwanted prefetch) does not;
- a delivery count reaching MaxDeliveryCount moves the message to the dead-letter
  queue with reason ``MaxDeliveryCountExceeded``;
- deferred messages leave the receive path and come back only by sequence number;
- expired messages are dropped, or dead-lettered with ``TTLExpiredException``
  when DeadLetteringOnMessageExpiration is set; dead-letter queues never expire;
- duplicate detection drops a message whose id was seen within the window;
- ForwardTo / ForwardDeadLetteredMessagesTo move messages on arrival.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from .clock import Clock, SystemClock
from .errors import (
    BadRequest,
    Conflict,
    EntityNotFound,
    LockLost,
    MessageNotFound,
    MessageSizeExceeded,
    NotAllowed,
    SessionCannotBeLocked,
    SessionLockLost,
)
from .faults import FaultError, Faults, InjectedFailure
from .filters import DEFAULT_RULE, Rule
from .journal import Journal
from .model import MessageData, MessageState, StoredMessage
from .rows import entity_doc
from .store import MessageStore, SessionState
from .topology import (
    EntityProperties,
    QueueConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
    Topology,
    TopologyError,
)

DEAD_LETTER_REASON = "DeadLetterReason"
DEAD_LETTER_DESCRIPTION = "DeadLetterErrorDescription"
MAX_FORWARD_HOPS = 4
_NOTHING_DIRTY: frozenset[MessageStore] = frozenset()  # Service Bus allows chains of at most four hops

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


class _Duplicates:
    """Message ids seen within the duplicate-detection window."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._seen: dict[str, float] = {}
        self._order: deque[tuple[float, str]] = deque()

    @classmethod
    def for_entity(cls, props: EntityProperties) -> _Duplicates | None:
        return cls(props.duplicate_detection_window) if props.requires_duplicate_detection else None

    def remember(self, message_id: str, when: float) -> None:
        """A message id seen before a restart (in time order)."""
        self._seen[message_id] = when
        self._order.append((when, message_id))

    def seen(self, message_id: str, now: float) -> bool:
        while self._order and self._order[0][0] + self.window <= now:
            t, mid = self._order.popleft()
            if self._seen.get(mid) == t:
                del self._seen[mid]
        if message_id in self._seen:
            return True
        self._seen[message_id] = now
        self._order.append((now, message_id))
        return False


class SequenceCounter:
    """Service Bus numbers each queue and topic from 1 (a topic's subscriptions share its numbers)."""

    __slots__ = ("last",)

    def __init__(self, last: int = 0) -> None:
        self.last = last

    def take(self) -> int:
        self.last += 1
        return self.last


@dataclass(eq=False)
class Queue:
    name: str
    props: EntityProperties
    store: MessageStore
    dead_letter: MessageStore
    duplicates: _Duplicates | None = None
    kind: str = "queue"
    sequence: SequenceCounter = field(default_factory=SequenceCounter)


@dataclass(eq=False)
class Subscription:
    topic: Topic
    name: str
    props: EntityProperties
    store: MessageStore
    dead_letter: MessageStore
    rules: list[Rule] = field(default_factory=list)
    kind: str = "subscription"

    def accepts(self, msg: StoredMessage) -> bool:
        return any(rule.matches(msg) for rule in self.rules)

    def admit(self, msg: StoredMessage, number: Callable[[], int]) -> list[StoredMessage]:
        """This subscription's copies of a topic message: one for all matching rules without an
        action, plus one per matching rule with an action (that action applied, ``RuleName`` set).
        The first copy keeps the topic's sequence number; further copies take new ones."""
        plain = False
        acting: list[Rule] = []
        for rule in self.rules:
            if rule.matches(msg):
                if rule.has_action:
                    acting.append(rule)
                else:
                    plain = True
        out: list[StoredMessage] = []
        if plain:
            out.append(msg.copy_for(msg.sequence_number, msg.enqueued_time))
        for rule in acting:
            copy = msg.copy_for(number() if out else msg.sequence_number, msg.enqueued_time)
            rule.apply(copy)
            out.append(copy)
        return out


@dataclass(eq=False)
class Topic:
    name: str
    props: EntityProperties
    scheduled: MessageStore
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    duplicates: _Duplicates | None = None
    kind: str = "topic"
    sequence: SequenceCounter = field(default_factory=SequenceCounter)


Receivable = Queue | Subscription
Entity = Queue | Topic


@dataclass(frozen=True)
class Source:
    """A receivable address: an entity's active log or its dead-letter sub-queue."""

    entity: Receivable
    store: MessageStore

    @property
    def is_dead_letter(self) -> bool:
        return self.store.is_dead_letter


@dataclass
class Lock:
    token: uuid.UUID
    store: MessageStore
    entity: Receivable
    seq: int
    owner: object | None
    session: SessionState | None = None


def _scheduled_store(target: Entity) -> MessageStore:
    """Where an entity keeps scheduled messages: a queue in its own log, a topic before fan-out."""
    return target.store if isinstance(target, Queue) else target.scheduled


class Broker:
    def __init__(self, topology: Topology, clock: Clock | None = None, journal: Journal | None = None) -> None:
        self.journal: Journal | None = None  # attached after the topology is built and restored
        self.clock: Clock = clock or SystemClock()
        self.lock = threading.RLock()
        self.namespace = topology.namespace
        self._entities: dict[str, Entity] = {}
        self._locks: dict[uuid.UUID, Lock] = {}
        self._owned: dict[object, set[uuid.UUID]] = {}
        self._timers: list[tuple[float, int, str, Any]] = []
        self._timer_ids = itertools.count()
        self._dirty: set[MessageStore] = set()
        self.faults = Faults()
        self.restored = 0
        self.restore_skipped = 0
        self._session_lost: dict[uuid.UUID, float] = {}
        self._owned_sessions: dict[object, list[SessionState]] = {}  # tokens whose session lock lapsed, and when
        for q in topology.queues:
            self.add_queue(q)
        for t in topology.topics:
            self.add_topic(t)
        try:
            self.faults.load(topology.faults)
        except FaultError as exc:
            raise TopologyError(str(exc)) from None
        if journal is not None:
            self._restore(journal)
            self.journal = journal
            for store in self._all_stores():
                store.journal = journal

    # ------------------------------------------------------------- durability

    def _all_stores(self) -> list[MessageStore]:
        out: list[MessageStore] = []
        for e in self._entities.values():
            if isinstance(e, Queue):
                out += [e.store, e.dead_letter]
            else:
                out.append(e.scheduled)
                for sub in e.subscriptions.values():
                    out += [sub.store, sub.dead_letter]
        return out

    def _restore_entities(self, journal: Journal) -> None:
        """Entities as the administration API left them: created, changed or deleted."""
        for path, doc in journal.entities():
            parts = path.split("/")
            if doc is None:
                try:
                    if len(parts) == 1:
                        self.delete_entity(parts[0])
                    else:
                        self.delete_subscription(parts[0], parts[2])
                except EntityNotFound:
                    pass
                continue
            props: EntityProperties = doc["properties"]
            if doc["kind"] == "subscription":
                rules: list[RuleConfig] = doc.get("rules") or []
                try:
                    sub = self.subscription(doc["topic"], doc["name"])
                except EntityNotFound:
                    self.add_subscription(doc["topic"], SubscriptionConfig(doc["name"], props, rules))
                    continue
                sub.props.__dict__.update(props.__dict__)
                sub.rules[:] = [Rule(r) for r in rules]
                continue
            existing = self._entities.get(parts[0])
            if existing is not None and existing.kind == doc["kind"]:
                existing.props.__dict__.update(props.__dict__)
                continue
            if existing is not None:
                self.delete_entity(parts[0])
            if doc["kind"] == "queue":
                self.add_queue(QueueConfig(doc["name"], props))
            else:
                self.add_topic(TopicConfig(doc["name"], props))

    def _record(self, entity: Entity | Subscription) -> None:
        """Note an entity's definition for --data-dir (after an administration API change)."""
        if self.journal is None:
            return
        if isinstance(entity, Subscription):
            path = f"{entity.topic.name}/subscriptions/{entity.name}"
            doc = entity_doc(
                "subscription",
                entity.name,
                entity.props,
                topic=entity.topic.name,
                rules=[r.config for r in entity.rules],
            )
        else:
            path, doc = entity.name, entity_doc(entity.kind, entity.name, entity.props)
        self.journal.entity(path, doc)

    @_locked
    def update_properties(self, entity: Entity | Subscription, props: EntityProperties) -> None:
        entity.props.__dict__.update(props.__dict__)
        self._record(entity)

    @_locked
    def put_rule(self, sub: Subscription, rule: Rule) -> bool:
        """Add or replace a subscription rule; True if it replaced one."""
        for i, existing in enumerate(sub.rules):
            if existing.name.lower() == rule.name.lower():
                sub.rules[i] = rule
                self._record(sub)
                return True
        sub.rules.append(rule)
        self._record(sub)
        return False

    @_locked
    def delete_rule(self, sub: Subscription, name: str) -> None:
        existing = next((r for r in sub.rules if r.name.lower() == name.lower()), None)
        if existing is None:
            raise EntityNotFound(f"The rule '{name}' could not be found.", entity=sub.store.path)
        sub.rules.remove(existing)
        self._record(sub)

    def _restore(self, journal: Journal) -> None:
        """Reload what a restart keeps; locks held then are gone (released)."""
        self._restore_entities(journal)
        owners: dict[str, tuple[MessageStore, Entity | Receivable]] = {}
        for e in self._entities.values():
            if isinstance(e, Queue):
                owners.update({st.path.lower(): (st, e) for st in (e.store, e.dead_letter)})
            else:
                owners[e.scheduled.path.lower()] = (e.scheduled, e)
                for sub in e.subscriptions.values():
                    owners.update({st.path.lower(): (st, sub) for st in (sub.store, sub.dead_letter)})
        by_path = {path: store for path, (store, _) in owners.items()}
        for name, last in journal.sequences().items():
            found = self._entities.get(name)
            if found is not None:
                found.sequence.last = max(found.sequence.last, last)
        restored = skipped = 0
        for path, msg in journal.messages():
            if path not in owners:
                skipped += 1  # its entity is gone
                continue
            store, owner = owners[path]
            numbered = self.entity(path.split("/")[0])
            numbered.sequence.last = max(numbered.sequence.last, msg.sequence_number)
            store.add(msg)
            restored += 1
            if msg.state is MessageState.SCHEDULED:
                self._timer(msg.enqueued_time, "scheduled", (owner, msg.sequence_number))
            elif msg.expires_at is not None and not store.is_dead_letter and not isinstance(owner, Topic):
                self._timer(msg.expires_at, "ttl", (owner, msg.sequence_number))
        now = self.clock.now()
        for entity_name, message_id, when in journal.duplicates():
            target = self._entities.get(entity_name)
            if target is not None and target.duplicates is not None and when + target.duplicates.window > now:
                target.duplicates.remember(message_id, when)
        for target in self._entities.values():
            if target.duplicates is not None:
                journal.prune_duplicates(target.name, now - target.duplicates.window)
        for path, session, state in journal.session_states():
            logged = by_path.get(path)
            if logged is not None and logged.sessions is not None:
                logged.session(session).state = state
        self.restored = restored
        self.restore_skipped = skipped

    # ------------------------------------------------------ entity lifecycle

    def _free_name(self, name: str) -> str:
        key = name.lower()
        if key in self._entities:
            raise Conflict(f"The messaging entity '{name}' already exists.", entity=name)
        return key

    @_locked
    def add_queue(self, config: QueueConfig) -> Queue:
        key = self._free_name(config.name)
        props = config.properties
        queue = Queue(
            config.name,
            props,
            MessageStore(config.name, sessions=props.requires_session),
            MessageStore(f"{config.name}/$DeadLetterQueue", is_dead_letter=True),
            _Duplicates.for_entity(props),
        )
        self._entities[key] = queue
        queue.store.journal = queue.dead_letter.journal = self.journal
        self._record(queue)
        return queue

    @_locked
    def add_topic(self, config: TopicConfig) -> Topic:
        key = self._free_name(config.name)
        topic = Topic(
            config.name,
            config.properties,
            MessageStore(config.name),
            duplicates=_Duplicates.for_entity(config.properties),
        )
        self._entities[key] = topic
        topic.scheduled.journal = self.journal
        self._record(topic)
        for sub in config.subscriptions:
            self.add_subscription(config.name, sub)
        return topic

    @_locked
    def add_subscription(self, topic_name: str, config: SubscriptionConfig) -> Subscription:
        topic = self.entity(topic_name)
        if not isinstance(topic, Topic):
            raise EntityNotFound(f"The topic '{topic_name}' could not be found.", entity=topic_name)
        if config.name.lower() in topic.subscriptions:
            raise Conflict(f"The subscription '{config.name}' already exists.", entity=topic_name)
        path = f"{topic.name}/Subscriptions/{config.name}"
        props = config.properties
        sub = Subscription(
            topic,
            config.name,
            props,
            MessageStore(path, sessions=props.requires_session),
            MessageStore(f"{path}/$DeadLetterQueue", is_dead_letter=True),
            [Rule(r) for r in (config.rules or [DEFAULT_RULE])],
        )
        topic.subscriptions[config.name.lower()] = sub
        sub.store.journal = sub.dead_letter.journal = self.journal
        self._record(sub)
        return sub

    @_locked
    def delete_entity(self, name: str) -> None:
        """Delete a queue or topic (with its subscriptions) and every message in it."""
        entity = self.entity(name)
        stores = (
            [entity.store, entity.dead_letter]
            if isinstance(entity, Queue)
            else [entity.scheduled] + [st for s in entity.subscriptions.values() for st in (s.store, s.dead_letter)]
        )
        self._drop_locks_in(stores)
        del self._entities[entity.name.lower()]
        if self.journal is not None:
            if isinstance(entity, Topic):
                for sub in entity.subscriptions.values():
                    self.journal.entity_deleted(f"{entity.name}/subscriptions/{sub.name}")
            self.journal.entity_deleted(entity.name)

    @_locked
    def delete_subscription(self, topic_name: str, name: str) -> None:
        sub = self.resolve_source(f"{topic_name}/Subscriptions/{name}").entity
        assert isinstance(sub, Subscription)
        self._drop_locks_in([sub.store, sub.dead_letter])
        del sub.topic.subscriptions[sub.name.lower()]
        if self.journal is not None:
            self.journal.entity_deleted(f"{sub.topic.name}/subscriptions/{sub.name}")

    def _drop_locks_in(self, stores: list[MessageStore]) -> None:
        for lock in [lk for lk in self._locks.values() if lk.store in stores]:
            self._unlock(lock)
        for store in stores:  # removed one by one so that a journal forgets them too
            for seq in list(store.messages):
                store.remove(seq)

    @_locked
    def subscription(self, topic_name: str, name: str) -> Subscription:
        sub = self.resolve_source(f"{topic_name}/Subscriptions/{name}").entity
        assert isinstance(sub, Subscription)
        return sub

    # ----------------------------------------------------------------- lookup

    @property
    def entities(self) -> list[Entity]:
        return list(self._entities.values())

    def entity(self, name: str) -> Entity:
        found = self._entities.get(name.strip("/").lower())
        if found is None:
            raise EntityNotFound(f"The messaging entity '{name}' could not be found.", entity=name)
        return found

    def resolve_source(self, path: str) -> Source:
        """``q``, ``q/$DeadLetterQueue``, ``t/Subscriptions/s`` or its DLQ -> a Source."""
        parts = [p for p in path.strip("/").split("/") if p]
        dead_letter = False
        if parts and parts[-1].lower() == "$deadletterqueue":
            dead_letter = True
            parts = parts[:-1]
            if parts and parts[-1].lower() == "$transfer":
                parts = parts[:-1]  # no transfers happen in one namespace: an empty log
        entity: Receivable
        if len(parts) == 1:
            found = self.entity(parts[0])
            if not isinstance(found, Queue):
                raise EntityNotFound(
                    f"Cannot receive from topic '{found.name}'; receive from one of its subscriptions.",
                    entity=path,
                )
            entity = found
        elif len(parts) == 3 and parts[1].lower() == "subscriptions":
            topic = self.entity(parts[0])
            sub = topic.subscriptions.get(parts[2].lower()) if isinstance(topic, Topic) else None
            if sub is None:
                raise EntityNotFound(f"The messaging entity '{path}' could not be found.", entity=path)
            entity = sub
        else:
            raise EntityNotFound(f"The messaging entity '{path}' could not be found.", entity=path)
        return Source(entity, entity.dead_letter if dead_letter else entity.store)

    def resolve_target(self, path: str) -> Entity:
        parts = [p for p in path.strip("/").split("/") if p]
        if len(parts) != 1:
            raise EntityNotFound(f"Cannot send to '{path}': send to a queue or a topic.", entity=path)
        return self.entity(parts[0])

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

    def _number(self, target: Entity) -> int:
        seq = target.sequence.take()
        if self.journal is not None:
            self.journal.note_sequence(target.name, seq)
        return seq

    def _check_ids(self, data: MessageData, entity: str) -> None:
        for name, value in (("MessageId", data.message_id), ("SessionId", data.session_id)):
            if value is not None and len(value) > 128:
                raise BadRequest(f"The {name} exceeds the maximum length of 128 characters.", entity=entity)

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
            application_properties=dict(data.application_properties),
            enqueue_sequence_number=seq,
        )
        if data.scheduled_enqueue_time is not None and data.scheduled_enqueue_time > now:
            msg.state = MessageState.SCHEDULED
            msg.enqueued_time = data.scheduled_enqueue_time
            _scheduled_store(target).add(msg)
            self._timer(data.scheduled_enqueue_time, "scheduled", (target, seq))
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
        if msg.expires_at < now + 10 * 365 * 86400:
            self._timer(msg.expires_at, "ttl", (entity, msg.sequence_number))

    # --------------------------------------------------------------- schedule

    @_locked
    def schedule(self, path: str, messages: list[MessageData]) -> list[int]:
        """The ``schedule-message`` management operation."""
        target = self.resolve_target(path)
        for data in messages:
            if data.scheduled_enqueue_time is None:
                raise BadRequest("Scheduled messages need a scheduled enqueue time.", entity=target.name)
        return self.send(path, messages)

    @_locked
    def cancel_scheduled(self, path: str, sequence_numbers: Iterable[int]) -> None:
        target = self.resolve_target(path)
        store = _scheduled_store(target)
        seqs = list(sequence_numbers)
        for seq in seqs:
            msg = store.messages.get(seq)
            if msg is None or msg.state is not MessageState.SCHEDULED:
                raise MessageNotFound(
                    f"The scheduled message with sequence number {seq} was not found.", entity=target.name
                )
        for seq in seqs:
            store.remove(seq)

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
        session = self._held_session(source, session_id, owner) if session_id is not None else None
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
        token = uuid.uuid4()
        msg.lock_token = token
        msg.lock_owner = owner
        self._locks[token] = Lock(token, source.store, source.entity, msg.sequence_number, owner, session)
        if owner is not None:
            self._owned.setdefault(owner, set()).add(token)
        if session is not None:
            msg.locked_until = session.locked_until  # a session message is locked by its session's lock
            return
        msg.locked_until = now + source.entity.props.lock_duration
        self._timer(msg.locked_until, "lock", token)

    def _unlock(self, lock: Lock) -> StoredMessage | None:
        del self._locks[lock.token]
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

    def _held(self, token: uuid.UUID, store: MessageStore | None = None) -> Lock:
        lock = self._locks.get(token)
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

    # ------------------------------------------------------------- settlement

    def _let_go(
        self, token: uuid.UUID, properties: dict[str, Any] | None, store: MessageStore | None
    ) -> tuple[Lock, StoredMessage | None]:
        """End a lock for abandon/defer, applying the properties to modify."""
        lock = self._held(token, store)
        msg = self._unlock(lock)
        if msg is not None and properties:
            msg.application_properties.update(properties)
        return lock, msg

    @_locked
    def complete(self, token: uuid.UUID, store: MessageStore | None = None) -> None:
        lock = self._held(token, store)
        self._unlock(lock)
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
            msg.state = MessageState.DEFERRED
            lock.store.touch(msg)

    @_locked
    def dead_letter(
        self,
        token: uuid.UUID,
        reason: str | None = None,
        description: str | None = None,
        properties: dict[str, Any] | None = None,
        store: MessageStore | None = None,
    ) -> None:
        lock = self._held(token, store)
        if lock.store.is_dead_letter:
            # Service Bus: "you can't dead-letter a message from a DLQ". The lock stays held.
            raise BadRequest(
                "Cannot dead-letter a message that is already in a dead-letter queue; complete or abandon it.",
                entity=lock.store.path,
            )
        msg = self._unlock(lock)
        if msg is None:
            return
        if properties:
            msg.application_properties.update(properties)
        self._move_to_dead_letter(lock.entity, lock.store, msg, reason, description)

    @_locked
    def release(self, token: uuid.UUID) -> None:
        """Give a lock back without counting a delivery (AMQP ``released``)."""
        lock = self._locks.get(token)
        if lock is None:
            return
        msg = self._unlock(lock)
        if msg is not None and msg.state is MessageState.ACTIVE:
            lock.store.mark_available(msg)
            self._dirty.add(lock.store)

    @_locked
    def release_owner(self, owner: object) -> int:
        """A link or connection went away. As on Service Bus, its message locks stay until they
        expire (then count a delivery attempt) or are settled by lock token, e.g. through
        ``update-disposition`` from another receiver. A session it held is released at once,
        and with it the locks of that session's messages. Returns how many message locks it held."""
        tokens = self._owned.pop(owner, set())
        for store_sessions in self._owned_sessions.pop(owner, ()):
            self._release_session(store_sessions)
        for token in tokens:
            lock = self._locks.get(token)
            if lock is not None:
                lock.owner = None
                msg = lock.store.messages.get(lock.seq)
                if msg is not None:
                    msg.lock_owner = None
        return len(tokens)

    @_locked
    def renew(self, tokens: Iterable[uuid.UUID], store: MessageStore | None = None) -> list[float]:
        now = self.clock.now()
        out = []
        for token in tokens:
            lock = self._held(token, store)
            if lock.session is not None:
                raise NotAllowed(
                    "Messages of a session are locked by the session: renew the session lock instead.",
                    entity=lock.store.path,
                )
            msg = lock.store.messages[lock.seq]
            msg.locked_until = now + lock.entity.props.lock_duration
            self._timer(msg.locked_until, "lock", token)
            out.append(msg.locked_until)
        return out

    @_locked
    def lose_locks(self, path: str) -> int:
        """Drop every lock held on a queue or subscription (and its DLQ), as a service update does:
        the messages are available again, delivery counts unchanged, and settling with the old
        lock fails with MessageLockLostError. Returns how many locks were lost."""
        source = self.resolve_source(path)
        stores = {source.entity.store, source.entity.dead_letter}
        lost = [lock for lock in self._locks.values() if lock.store in stores]
        for lock in lost:
            msg = self._unlock(lock)
            if msg is not None and msg.state is MessageState.ACTIVE:
                lock.store.mark_available(msg)
                self._dirty.add(lock.store)
        return len(lost)

    # ------------------------------------------------------ deferred messages

    @_locked
    def receive_deferred(
        self, source: Source, sequence_numbers: Iterable[int], *, peek_lock: bool, owner: object | None = None
    ) -> list[StoredMessage]:
        now = self.clock.now()
        seqs = list(sequence_numbers)
        found = []
        for seq in seqs:
            msg = source.store.messages.get(seq)
            if msg is None or msg.state is not MessageState.DEFERRED or msg.locked:
                raise MessageNotFound(
                    f"Failed to retrieve the deferred message with sequence number {seq}.",
                    entity=source.store.path,
                )
            found.append(msg)
        for msg in found:
            if peek_lock:
                self._lock(source, msg, now, owner)
            else:
                source.store.remove(msg.sequence_number)
        return found

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

    @staticmethod
    def _set_dead_letter_reason(msg: StoredMessage, reason: str | None, description: str | None) -> None:
        if reason is not None:
            msg.application_properties[DEAD_LETTER_REASON] = reason
        if description is not None:
            msg.application_properties[DEAD_LETTER_DESCRIPTION] = description

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
        self._set_dead_letter_reason(msg, reason, description)
        forward = entity.props.forward_dead_lettered_messages_to
        now = self.clock.now()
        if forward:
            dest = self.entity(forward)
            copy = msg.copy_for(self._number(dest), now)
            copy.dead_letter_source = entity.store.path
            copy.application_properties = dict(msg.application_properties)
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

    def _timer(self, due: float, kind: str, key: Any) -> None:
        heapq.heappush(self._timers, (due, next(self._timer_ids), kind, key))

    def next_due(self) -> float | None:
        return self._timers[0][0] if self._timers else None

    @_locked
    def tick(self) -> None:
        """Fire every timer that has fallen due: lock expiry, schedules, TTL."""
        now = self.clock.now()
        timers = self._timers
        while timers and timers[0][0] <= now:
            due, _, kind, key = heapq.heappop(timers)
            if kind == "lock":
                self._fire_lock(key, due)
            elif kind == "scheduled":
                self._fire_scheduled(key[0], key[1], now)
            elif kind == "ttl":
                self._fire_ttl(key[0], key[1], now)
            elif kind == "session":
                self._fire_session_lock(key[0], key[1], key[2], due)
        if self._session_lost:
            for token, when in list(self._session_lost.items()):
                if when + 600 < now:
                    del self._session_lost[token]

    def _fire_lock(self, token: uuid.UUID, due: float) -> None:
        lock = self._locks.get(token)
        if lock is None:
            return
        msg = lock.store.messages.get(lock.seq)
        if msg is None or msg.locked_until != due:
            return  # renewed since, or gone
        self._unlock(lock)
        self._count_failed_delivery(lock.entity, lock.store, msg)

    def _fire_scheduled(self, target: Entity, seq: int, now: float) -> None:
        store = _scheduled_store(target)
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

    def _session_store(self, source: Source) -> MessageStore:
        if source.store.sessions is None:
            raise NotAllowed(
                f"'{source.store.path}' is not session-enabled: use a plain receiver.", entity=source.store.path
            )
        return source.store

    @_locked
    def accept_session(self, source: Source, session_id: str | None, owner: object) -> SessionState | None:
        """Lock a session for ``owner``: the named one, or the next with available messages.
        Returns None when ``session_id`` is None and no session is free (the caller may wait)."""
        store = self._session_store(source)
        assert store.sessions is not None
        now = self.clock.now()
        if session_id is None:
            best: tuple[int, SessionState] | None = None
            for sess in store.sessions.values():
                if sess.owner is None and store.has_available(sess.id):
                    first = sess.available[0]
                    if best is None or first < best[0]:
                        best = (first, sess)
            if best is None:
                return None
            session = best[1]
        else:
            session = store.session(session_id)
            if session.owner is not None:
                raise SessionCannotBeLocked(
                    f"The requested session '{session_id}' cannot be accepted. It may be locked by another receiver.",
                    entity=store.path,
                )
        session.owner = owner
        session.locked_until = now + source.entity.props.lock_duration
        self._owned_sessions.setdefault(owner, []).append(session)
        self._timer(session.locked_until, "session", (source.entity, store, session.id))
        return session

    def _held_session(self, source: Source, session_id: str, owner: object | None) -> SessionState:
        store = self._session_store(source)
        session = store.session(session_id)
        if session.owner is None or (owner is not None and session.owner is not owner):
            raise SessionLockLost(
                f"The session lock for '{session_id}' has expired or is held elsewhere.", entity=store.path
            )
        return session

    @_locked
    def renew_session_lock(self, source: Source, session_id: str) -> float:
        store = self._session_store(source)
        session = store.session(session_id)
        if session.owner is None:
            raise SessionLockLost(f"The session lock for '{session_id}' has expired.", entity=store.path)
        session.locked_until = self.clock.now() + source.entity.props.lock_duration
        for lock in self._locks.values():
            if lock.session is session:
                msg = lock.store.messages.get(lock.seq)
                if msg is not None:
                    msg.locked_until = session.locked_until
        self._timer(session.locked_until, "session", (source.entity, store, session.id))
        return session.locked_until

    def _fire_session_lock(self, entity: Receivable, store: MessageStore, session_id: str, due: float) -> None:
        session = store.session(session_id)
        if session.owner is None or session.locked_until != due:
            return  # renewed or released since
        owned = self._owned_sessions.get(session.owner)
        if owned is not None and session in owned:
            owned.remove(session)
        self._release_session(session, lapsed=True)

    def _release_session(self, session: SessionState, *, lapsed: bool = False) -> None:
        """The session's lock ends: its message locks end with it, each counting a delivery attempt."""
        now = self.clock.now()
        for lock in [lk for lk in self._locks.values() if lk.session is session]:
            msg = self._unlock(lock)
            if lapsed:
                self._session_lost[lock.token] = now
            if msg is not None:
                self._count_failed_delivery(lock.entity, lock.store, msg)
        session.owner = None
        session.locked_until = None

    @_locked
    def session_state(self, source: Source, session_id: str) -> bytes | None:
        return self._session_store(source).session(session_id).state

    @_locked
    def set_session_state(self, source: Source, session_id: str, state: bytes | None) -> None:
        store = self._session_store(source)
        session = store.session(session_id)
        session.state = state
        session.state_updated = self.clock.now()
        if self.journal is not None:
            self.journal.session_state(store.path, session_id, state)

    @_locked
    def list_sessions(self, source: Source, updated_after: float | None = None) -> list[str]:
        """Sessions with active messages or stored state (or state updated after a time)."""
        store = self._session_store(source)
        assert store.sessions is not None
        active = {m.data.session_id for m in store.messages.values() if m.state is MessageState.ACTIVE}
        out = []
        for sess in store.sessions.values():
            if updated_after is not None:
                if sess.state is not None and sess.state_updated > updated_after:
                    out.append(sess.id)
            elif sess.id in active or sess.state is not None:
                out.append(sess.id)
        return out

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
