"""The broker's entities as the journal keeps them (``--data-dir``): ``Journal.record`` and
``Journal.record_deleted`` (the broker's ``Recorder``) note these rows when an entity is created,
changed or deleted; ``durability.py`` reads them back at start-up."""

from __future__ import annotations

from ..broker.entities import Entity, Subscription, Topic
from .rows import entity_doc


def entity_row(entity: Entity | Subscription) -> tuple[str, str]:
    """An entity's path and its definition (JSON), as the journal notes them."""
    if isinstance(entity, Subscription):
        doc = entity_doc(
            "subscription",
            entity.name,
            entity.props,
            topic=entity.topic.name,
            rules=[r.config for r in entity.rules],
            created_at=entity.created_at,
        )
        return entity.path, doc
    return entity.name, entity_doc(entity.kind, entity.name, entity.props, created_at=entity.created_at)


def deleted_paths(entity: Entity | Subscription) -> list[str]:
    """The paths an entity's deletion ends: a topic's subscriptions, then the entity's own."""
    paths = [sub.path for sub in entity.subscriptions.values()] if isinstance(entity, Topic) else []
    return [*paths, entity.path if isinstance(entity, Subscription) else entity.name]
