"""Queues, topics and subscriptions, their message stores, and the registry that names them.

An entity owns its stores (active log, dead-letter sub-queue; a topic keeps
scheduled messages before fan-out), its sequence numbering and its
duplicate-detection history. The registry creates, finds and removes entities
by name or address; it knows nothing of locks, sessions or time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..errors import Conflict, EntityNotFound
from ..topology import EntityProperties, QueueConfig, SubscriptionConfig, TopicConfig
from .model import StoredMessage
from .rules import DEFAULT_RULE, Rule, admit
from .store import MessageStore


class Duplicates:
    """Message ids seen within the duplicate-detection window."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._seen: dict[str, float] = {}
        self._order: deque[tuple[float, str]] = deque()

    @classmethod
    def for_entity(cls, props: EntityProperties) -> Duplicates | None:
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
    duplicates: Duplicates | None = None
    kind: str = "queue"
    sequence: SequenceCounter = field(default_factory=SequenceCounter)
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))  # the admin API's CreatedAt


@dataclass(eq=False)
class Subscription:
    topic: Topic
    name: str
    props: EntityProperties
    store: MessageStore
    dead_letter: MessageStore
    rules: list[Rule] = field(default_factory=list)
    kind: str = "subscription"
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def path(self) -> str:
        return f"{self.topic.name}/subscriptions/{self.name}"

    def accepts(self, msg: StoredMessage) -> bool:
        return any(rule.matches(msg) for rule in self.rules)

    def admit(self, msg: StoredMessage, number: Callable[[], int]) -> list[StoredMessage]:
        """This subscription's copies of a topic message (see ``filters.admit``)."""
        return admit(self.rules, msg, number)


@dataclass(eq=False)
class Topic:
    name: str
    props: EntityProperties
    scheduled: MessageStore
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    duplicates: Duplicates | None = None
    kind: str = "topic"
    sequence: SequenceCounter = field(default_factory=SequenceCounter)
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))


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


def scheduled_store(target: Entity) -> MessageStore:
    """Where an entity keeps scheduled messages: a queue in its own log, a topic before fan-out."""
    return target.store if isinstance(target, Queue) else target.scheduled


def stores_of(entity: Entity | Subscription) -> list[MessageStore]:
    """Every store an entity owns (a topic's include its subscriptions')."""
    if isinstance(entity, Topic):
        return [entity.scheduled] + [st for s in entity.subscriptions.values() for st in stores_of(s)]
    return [entity.store, entity.dead_letter]


class Registry:
    """Entities by (case-insensitive) name, and addresses resolved to them."""

    def __init__(self) -> None:
        self._entities: dict[str, Entity] = {}

    def __iter__(self) -> Iterator[Entity]:
        return iter(list(self._entities.values()))

    def get(self, name: str) -> Entity | None:
        return self._entities.get(name.strip("/").lower())

    def _free_name(self, name: str) -> str:
        key = name.lower()
        if key in self._entities:
            raise Conflict(f"The messaging entity '{name}' already exists.", entity=name)
        return key

    def add_queue(self, config: QueueConfig) -> Queue:
        key = self._free_name(config.name)
        props = config.properties
        queue = Queue(
            config.name,
            props,
            MessageStore(config.name, sessions=props.requires_session),
            MessageStore(f"{config.name}/$DeadLetterQueue", is_dead_letter=True),
            Duplicates.for_entity(props),
        )
        self._entities[key] = queue
        return queue

    def add_topic(self, config: TopicConfig) -> Topic:
        key = self._free_name(config.name)
        topic = Topic(
            config.name,
            config.properties,
            MessageStore(config.name),
            duplicates=Duplicates.for_entity(config.properties),
        )
        self._entities[key] = topic
        return topic

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
        return sub

    def remove(self, entity: Entity) -> None:
        del self._entities[entity.name.lower()]

    def entity(self, name: str) -> Entity:
        found = self.get(name)
        if found is None:
            raise EntityNotFound(f"The messaging entity '{name}' could not be found.", entity=name)
        return found

    def subscription(self, topic_name: str, name: str) -> Subscription:
        sub = self.resolve_source(f"{topic_name}/Subscriptions/{name}").entity
        assert isinstance(sub, Subscription)
        return sub

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

    def owners(self) -> dict[str, tuple[MessageStore, Entity | Receivable]]:
        """Every store by lower-case path, with the entity that owns it."""
        out: dict[str, tuple[MessageStore, Entity | Receivable]] = {}
        for e in self._entities.values():
            if isinstance(e, Queue):
                out.update({st.path.lower(): (st, e) for st in (e.store, e.dead_letter)})
            else:
                out[e.scheduled.path.lower()] = (e.scheduled, e)
                for sub in e.subscriptions.values():
                    out.update({st.path.lower(): (st, sub) for st in (sub.store, sub.dead_letter)})
        return out
