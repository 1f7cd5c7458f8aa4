"""Entity runtime counts through the administration API (which the emulator serves too)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..connections.live import LiveConnection
from ..connections.registry import ConnectionLike, live
from ..entities import EntityPath
from ..errors import ConfigurationError, EntityNotFoundError, SbError, ServiceError
from ..sdk.failures import UNAUTHORIZED, from_sdk, is_entity_not_found, role_needed, sign_in_failure

T = TypeVar("T")


@dataclass(frozen=True)
class EntityCounts:
    """An entity's message counts, as the administration API gives them (``counts``,
    ``list_entities``): active, dead-lettered, scheduled, in transfer, the ``total`` Service Bus
    reports, and the size in bytes."""

    entity: str
    active: int
    dead_letter: int
    scheduled: int
    transfer: int
    transfer_dead_letter: int
    total: int
    size_bytes: int | None
    kind: str = "queue"  # queue, topic or subscription


def admin_error(exc: BaseException, conn: LiveConnection, entity: str | None = None) -> SbError:
    """An administration API failure in one line (no raw XML, no secret)."""
    name = type(exc).__name__
    where = f" ({entity})" if entity else ""
    if is_entity_not_found(exc):
        return EntityNotFoundError(f"Entity not found{where}: check the name with core.list_entities().")
    if sign_in_failure(exc) is not None:
        return from_sdk(exc, entity=entity)  # no token at all: not a missing right
    if name == "ClientAuthenticationError" or getattr(exc, "status_code", None) in (401, 403):
        needed = role_needed(str(exc), where)
        if needed is not None:
            return ConfigurationError(needed, condition=UNAUTHORIZED)
        # Counts come from the administration API, which needs the Manage right: an entity's
        # Send or Listen key (or a wrong key) is refused here although it works for messages.
        return ConfigurationError(
            f"The administration API of {conn.settings} refused the key or credential{where}: it needs the "
            "'Manage' right (a policy with Manage on the namespace; with Entra ID the role Azure Service Bus "
            "Data Owner). Keys without it still do what their rights allow (Send: send; Listen: peek, receive, "
            "settle).",
            condition=UNAUTHORIZED,
        )
    if name in ("ServiceRequestError", "ServiceResponseError"):
        return ServiceError(f"Cannot reach the administration API of {conn.settings}{where}.", retryable=True)
    return from_sdk(exc, entity=entity)


def counts(entity: str | EntityPath, *, connection: ConnectionLike = None) -> EntityCounts:
    """Active, dead-letter, scheduled and transfer counts of a queue or subscription (admin API)."""
    path = EntityPath.parse(entity).parent
    conn = live(connection)
    try:
        admin = conn.admin()
        if path.is_subscription:
            p: Any = admin.get_subscription_runtime_properties(path.name, path.subscription)
            size = None
        else:
            p = admin.get_queue_runtime_properties(path.name)
            size = p.size_in_bytes
    except SbError:
        raise
    except Exception as exc:
        raise admin_error(exc, conn, str(path)) from None
    return _counts_of(str(path), p, size, "subscription" if path.is_subscription else "queue")


def admin_call(conn: LiveConnection, work: Callable[[Any], T], entity: str | None = None) -> T:
    """``work(admin client)``, an administration API failure said in one line (``admin_error``)."""
    try:
        return work(conn.admin())
    except SbError:
        raise
    except Exception as exc:
        raise admin_error(exc, conn, entity) from None


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


def list_entities(*, connection: ConnectionLike = None) -> list[EntityCounts]:
    """Every queue, topic and subscription with its counts (topics hold only scheduled messages)."""
    conn = live(connection)
    out: list[EntityCounts] = []
    try:
        admin = conn.admin()
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
        raise admin_error(exc, conn) from None
    return out
