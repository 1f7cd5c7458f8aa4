"""Entity runtime counts through the administration API (which the emulator serves too)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .connection import Connection, resolve
from .entities import EntityPath
from .errors import EntityNotFoundError, SbError, from_sdk


@dataclass(frozen=True)
class EntityCounts:
    entity: str
    active: int
    dead_letter: int
    scheduled: int
    transfer: int
    transfer_dead_letter: int
    total: int
    size_bytes: int | None
    kind: str = "queue"  # queue, topic or subscription


def counts(entity: str | EntityPath, *, connection: str | Connection | None = None) -> EntityCounts:
    path = EntityPath.parse(entity).parent
    conn = resolve(connection)
    try:
        with conn.admin_client() as admin:
            if path.is_subscription:
                p: Any = admin.get_subscription_runtime_properties(path.name, path.subscription)
                size = None
            else:
                p = admin.get_queue_runtime_properties(path.name)
                size = p.size_in_bytes
    except SbError:
        raise
    except Exception as exc:
        if type(exc).__name__ == "ResourceNotFoundError":
            raise EntityNotFoundError(f"Entity not found: {path}") from None
        raise from_sdk(exc, entity=str(path)) from None
    return _counts_of(str(path), p, size, "subscription" if path.is_subscription else "queue")


def _counts_of(name: str, p: Any, size: int | None, kind: str) -> EntityCounts:
    return EntityCounts(
        name,
        p.active_message_count,
        p.dead_letter_message_count,
        getattr(p, "scheduled_message_count", 0) or 0,  # subscriptions have none: topics hold them
        p.transfer_message_count,
        p.transfer_dead_letter_message_count,
        p.total_message_count,
        size,
        kind,
    )


def list_entities(*, connection: str | Connection | None = None) -> list[EntityCounts]:
    """Every queue, topic and subscription with its counts (topics hold only scheduled messages)."""
    conn = resolve(connection)
    out: list[EntityCounts] = []
    try:
        with conn.admin_client() as admin:
            for q in admin.list_queues_runtime_properties():
                out.append(_counts_of(q.name, q, q.size_in_bytes, "queue"))
            for t in admin.list_topics_runtime_properties():
                sched = t.scheduled_message_count or 0
                out.append(EntityCounts(t.name, 0, 0, sched, 0, 0, sched, t.size_in_bytes, "topic"))
                for sub in admin.list_subscriptions_runtime_properties(t.name):
                    out.append(_counts_of(f"{t.name}/subscriptions/{sub.name}", sub, None, "subscription"))
    except SbError:
        raise
    except Exception as exc:
        raise from_sdk(exc) from None
    return out
