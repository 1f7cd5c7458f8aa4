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
    return EntityCounts(
        str(path),
        p.active_message_count,
        p.dead_letter_message_count,
        p.scheduled_message_count,
        p.transfer_message_count,
        p.transfer_dead_letter_message_count,
        p.total_message_count,
        size,
    )
