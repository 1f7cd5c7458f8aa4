"""Links: the SDK senders and receivers the operations borrow, and the pool that keeps them.

A :class:`LinkPool` holds the idle links of one kind for one entity (``LinkPools.pool``, ``pools.py``, makes
one per kind and entity); ``receiver_for`` makes the SDK receiver for a queue, subscription or
dead-letter queue; ``opened`` holds a link open for one block; ``quietly`` closes over a dead
connection without raising.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from ..entities import EntityPath
from ..errors import SbError
from ..sdk.api import ServiceBusSubQueue
from ..sdk.failures import is_entity_not_found, is_management_link_lost
from ..sdk.opening import close_now, open_without_sleeps

log = logging.getLogger("sbnotebook.live")


class StaleLink(SbError):
    """A pooled link that had been open failed with "entity not found": Service Bus detaches the
    links of an entity when it is deleted, and it may have been made again under the same name since.
    The link is closed; ``LinkPools.reconnecting`` runs the work once more on a new one (whose attach
    says whether the entity exists now)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def stale(exc: BaseException, new: bool) -> bool:
    """Did a link that was reused from a pool fail because its entity was deleted under it? Its
    receive link is detached with not-found, its management link forced off (the SDK says only that
    the management operation failed)."""
    return not new and (is_entity_not_found(exc) or is_management_link_lost(exc))


@dataclass
class LinkPool:
    """Idle links of one kind for one entity."""

    opener: Callable[[], Awaitable[Any]]
    idle: list[tuple[Any, float]] = field(default_factory=list)  # (link, last used, monotonic)
    busy: dict[int, Any] = field(default_factory=dict)  # id() -> link handed out

    async def acquire(self) -> tuple[Any, bool]:
        """A link for one operation: an idle one, else a newly opened one. (link, was it new)."""
        if self.idle:
            link, _ = self.idle.pop()
            self.busy[id(link)] = link
            return link, False
        link = await self.opener()
        self.busy[id(link)] = link
        return link, True

    def release(self, link: Any) -> bool:
        """Take a link back for reuse. False for a link this pool did not hand out (one borrowed
        before a reconnect or close replaced the pools): the caller closes it instead."""
        if self.busy.pop(id(link), None) is None:
            return False
        self.idle.append((link, time.monotonic()))
        return True

    def forget(self, link: Any) -> None:
        self.busy.pop(id(link), None)

    async def give_back(self, link: Any, *, keep: bool = True) -> None:
        """The end of a borrow: back for reuse when ``keep``, else closed; so is a link this pool
        did not hand out (see ``release``)."""
        if keep and self.release(link):
            return
        self.forget(link)
        await close_now(link)

    async def give_back_stale(self, link: Any) -> None:
        """Close a link detached with its deleted entity, and the idle ones beside it: attached to
        the same entity, they were detached too (a retry must not pick one of them)."""
        await quietly(self.give_back(link, keep=False))
        for other in self.take_idle():
            await quietly(close_now(other))

    def take_idle(self, older_than: float | None = None) -> list[Any]:
        now = time.monotonic()
        keep: list[tuple[Any, float]] = []
        out: list[tuple[Any, float]] = []
        for link, used in self.idle:
            (out if older_than is None or now - used >= older_than else keep).append((link, used))
        self.idle = keep
        return [link for link, _ in out]


def receiver_for(client: Any, path: EntityPath, **kwargs: Any) -> Any:
    """An SDK receiver for a queue, subscription or dead-letter queue."""
    if path.sub_queue == "dead_letter":
        kwargs["sub_queue"] = ServiceBusSubQueue.DEAD_LETTER
    elif path.sub_queue == "transfer_dead_letter":
        kwargs["sub_queue"] = ServiceBusSubQueue.TRANSFER_DEAD_LETTER
    if path.subscription is not None:
        return client.get_subscription_receiver(path.name, path.subscription, **kwargs)
    return client.get_queue_receiver(path.name, **kwargs)


@asynccontextmanager
async def opened(handler: Any) -> AsyncIterator[Any]:
    """An SDK sender or receiver, open for the block and closed at once after it (``close_now``)."""
    await open_without_sleeps(handler)
    try:
        yield handler
    finally:
        await close_now(handler)


async def quietly(awaitable: Awaitable[Any]) -> None:
    """Closing a link over a dead connection fails; that is expected, and logged at debug."""
    try:
        await awaitable
    except Exception as exc:
        log.debug("while closing: %r", exc)
