"""What ``--data-dir`` brings back into a broker at start-up.

The journal (``journal.py``) stores; ``recording.py`` turns entity changes into rows; this module
maps the rows back onto a new broker's entities (``open_broker``), before the journal is attached.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from ...sqlrules.lexer import SqlFilterError
from ..broker.broker import Broker
from ..broker.clock import Clock
from ..broker.entities import Queue, Subscription, Topic, stores_of
from ..broker.model import MessageState
from ..broker.rules import Rule
from ..broker.timers import NEVER, SCHEDULED, TTL
from ..errors import EntityNotFound
from ..topology import (
    EntityProperties,
    QueueConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
    Topology,
    TopologyError,
)
from .journal import Journal


def open_broker(topology: Topology, clock: Clock | None = None, journal: Journal | None = None) -> Broker:
    """A broker for ``topology``; with a journal, what it kept is restored first, then every change
    from here on is journaled."""
    broker = Broker(topology, clock)
    if journal is not None:
        with _no_cyclic_gc():
            broker.restored, broker.restore_skipped = restore(broker, journal)
        _keep_topology_births(broker, journal)
        broker.attach_journal(journal)
        # What fell due while stopped fires now, journaled, as it would have running: a schedule
        # is numbered again (firing.py) before anyone can peek or receive it under its old number.
        broker.tick()
        # A broker killed with a long tail: fold it in now (before serving), so the next
        # start-up reads a snapshot instead of decoding the tail row by row again.
        broker.compacted_at_start = compact_if_large(broker, journal)
    return broker


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """A start-up creates a few objects per message, all kept and none in a cycle; the cyclic
    collector would walk every one of them again and again as they pile up (4.7 of 12.2 s for 10^6
    messages). Off while loading, back on (if it was) after: nothing it could free is lost."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def live_messages(broker: Broker) -> int:
    return sum(len(store) for entity in broker.registry for store in stores_of(entity))


def compact(broker: Broker, journal: Journal) -> int:
    """Fold the journal's tail into a new snapshot of every live message (``journal.py``). Call
    with the broker's lock held (or before it serves): the snapshot is the broker's state now."""
    stores = [(store.path, store.messages.values()) for entity in broker.registry for store in stores_of(entity)]
    return journal.compact(stores)


def compact_if_large(broker: Broker, journal: Journal) -> bool:
    """Compact when the tail is large against the live messages (``Journal.should_compact``)."""
    if not journal.should_compact(live_messages(broker)):
        return False
    compact(broker, journal)
    return True


def restore(broker: Broker, journal: Journal) -> tuple[int, int]:
    """Reload what a restart keeps; locks held then are gone (released).
    Returns (messages restored, messages skipped because their entity is gone)."""
    _restore_entities(broker, journal)
    registry = broker.registry
    owners = registry.owners()
    for name, last in journal.sequences().items():
        found = registry.get(name)
        if found is not None:
            found.sequence.last = max(found.sequence.last, last)
    restored = skipped = 0
    horizon = broker.clock.now() + NEVER  # no timer for a message that effectively never expires
    last_path: str | None = None
    where: tuple[Any, Any, Any] | None = None
    for path, msg in journal.messages():  # ordered by store: one lookup per store
        if path != last_path:
            last_path = path
            where = (*owners[path], registry.entity(path.split("/")[0])) if path in owners else None
        if where is None:
            skipped += 1
            continue
        store, owner, numbered = where
        if msg.sequence_number > numbered.sequence.last:
            numbered.sequence.last = msg.sequence_number
        store.add(msg)
        restored += 1
        if msg.state is MessageState.SCHEDULED:
            broker.timers.add(msg.enqueued_time, SCHEDULED, (owner, msg.sequence_number))
        elif (
            msg.expires_at is not None
            and msg.expires_at < horizon
            and not store.is_dead_letter
            and not isinstance(owner, Topic)
        ):
            broker.timers.add(msg.expires_at, TTL, (owner, msg.sequence_number))
    now = broker.clock.now()
    for entity_name, message_id, when in journal.duplicates():
        target = registry.get(entity_name)
        if target is not None and target.duplicates is not None and when + target.duplicates.window > now:
            target.duplicates.remember(message_id, when)
    for target in registry:
        if target.duplicates is not None:
            journal.prune_duplicates(target.name, now - target.duplicates.window)
    for path, session, state in journal.session_states():
        logged = owners.get(path)
        if logged is not None and logged[0].sessions is not None:
            logged[0].session(session).state = state
    return restored, skipped


def _keep_topology_births(broker: Broker, journal: Journal) -> None:
    """An entity of the topology file that the administration API never touched is built again at
    each start; its CreatedAt is kept from its first start, as Service Bus answers one creation time
    for an entity that was never deleted (a copy's resume record compares it: a new time would make
    an interrupted copy start over and send again what it had sent)."""
    by_api = {path for path, _ in journal.entities()}
    kept = journal.births()
    births: dict[str, int] = {}
    for entity in broker.registry:
        ones: list[Queue | Topic | Subscription] = [entity]
        if isinstance(entity, Topic):
            ones.extend(entity.subscriptions.values())
        for one in ones:
            path = (one.path if isinstance(one, Subscription) else one.name).lower()
            if path in by_api:  # the journal's entity doc carries its own creation time
                continue
            if path in kept:
                one.created_at = datetime.fromtimestamp(kept[path] / 1e6, UTC)
            births[path] = kept.get(path, round(one.created_at.timestamp() * 1e6))
    journal.keep_births(births)


def _check_rules(path: str, rules: list[RuleConfig]) -> None:
    """A rule kept by an earlier emulator that today's grammar refuses stops the start-up naming it
    (not a routing silently changed): the data dir is the user's to mend."""
    for config in rules:
        try:
            Rule(config)
        except SqlFilterError as exc:
            raise TopologyError(
                f"--data-dir: subscription {path}, rule {config.name!r}: {exc} (kept by an earlier emulator; "
                "Service Bus's grammar refuses it: delete the rule there, or start without --data-dir)"
            ) from None


def _restore_entities(broker: Broker, journal: Journal) -> None:
    """Entities as the administration API left them: created, changed or deleted."""
    for path, doc in journal.entities():
        parts = path.split("/")
        if doc is None:
            try:
                if len(parts) == 1:
                    broker.delete_entity(parts[0])
                else:
                    broker.delete_subscription(parts[0], parts[2])
            except EntityNotFound:
                pass
            continue
        props: EntityProperties = doc["properties"]
        existing = broker.registry.get(parts[0]) if len(parts) == 1 else None
        if "policies" not in doc and existing is not None:  # a journal from before policies were kept
            props.policies = existing.props.policies
        entity: Any
        if doc["kind"] == "subscription":
            rules: list[RuleConfig] = doc.get("rules") or []
            _check_rules(path, rules)
            try:
                entity = broker.subscription(doc["topic"], doc["name"])
                entity.props.__dict__.update(props.__dict__)
                entity.rules[:] = [Rule(r) for r in rules]
            except EntityNotFound:
                entity = broker.add_subscription(doc["topic"], SubscriptionConfig(doc["name"], props, rules))
        else:
            entity = broker.registry.get(parts[0])
            if entity is not None and entity.kind == doc["kind"]:
                entity.props.__dict__.update(props.__dict__)
            else:
                if entity is not None:
                    broker.delete_entity(parts[0])
                if doc["kind"] == "queue":
                    entity = broker.add_queue(QueueConfig(doc["name"], props))
                else:
                    entity = broker.add_topic(TopicConfig(doc["name"], props))
        if "created_at" in doc:  # as the administration API said before the restart
            entity.created_at = doc["created_at"]
