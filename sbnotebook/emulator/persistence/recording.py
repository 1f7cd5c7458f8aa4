"""What the journal notes when an entity is created, changed or deleted (``--data-dir``).
The broker calls these; ``durability.py`` reads the notes back at start-up."""

from __future__ import annotations

from ..broker.entities import Entity, Subscription, Topic
from .journal import Journal
from .rows import entity_doc


def record(journal: Journal | None, entity: Entity | Subscription) -> None:
    """Note an entity's definition (after a change through the administration API)."""
    if journal is None:
        return
    if isinstance(entity, Subscription):
        doc = entity_doc(
            "subscription",
            entity.name,
            entity.props,
            topic=entity.topic.name,
            rules=[r.config for r in entity.rules],
            created_at=entity.created_at,
        )
        journal.entity(entity.path, doc)
    else:
        journal.entity(entity.name, entity_doc(entity.kind, entity.name, entity.props, created_at=entity.created_at))


def record_deleted(journal: Journal | None, entity: Entity | Subscription) -> None:
    if journal is None:
        return
    if isinstance(entity, Topic):
        for sub in entity.subscriptions.values():
            journal.entity_deleted(sub.path)
    journal.entity_deleted(entity.path if isinstance(entity, Subscription) else entity.name)
