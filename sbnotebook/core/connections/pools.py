"""The link pools of a live connection, across the generations of its SDK client.

A :class:`LinkPools` is the middle layer of a live connection: below it the event-loop thread
(``loop.py``'s ``LoopThread``), above it the client's lifecycle (``live.py``'s ``LiveConnection``,
which makes the SDK client, warms links and holds the admin client). What it owns:

- **the pools**: one :class:`~sbnotebook.core.connections.links.LinkPool` per kind of link and entity
  (``pool``); an operation borrows a link (``link``, ``with_link``, or ``acquire``/``give_back``)
  and gives it back; a link whose connection broke is closed instead.
- **generations**: a :class:`Generation` is one SDK client, the credential made for it and its
  spare AMQP connections; ``sdk_client()`` starts one when there is none. ``reconnect()`` ends the
  current one: its idle links and spares are closed, the pools emptied, the client *retired*, and
  the next call starts the next generation. ``reconnecting(work)`` is the one "reconnect once, then
  retry", and reconnects only if no other call has already (``generation`` changed).
- **retired clients**: closing an SDK client shuts every handler it made, so a link still borrowed
  from an ended generation (a send being retried, a scan's receivers) would fail mid-operation. The
  client is kept in ``_retired`` instead. A borrowed link whose connection was lost is closed when
  given back; one given back to the current pool of its kind and entity (a ``LockedBatch``) is not
  that pool's, and is closed (``LinkPool.give_back``); one given back to the pool it was taken from
  (``link``, a receive) goes to that dropped pool's idle list, out of the reaper's reach, and is
  closed with its client. ``close()`` closes the retired clients.
- **the reaper**: a task on the loop, started with the first generation, that every
  ``REAPER_INTERVAL`` seconds closes the links idle for ``idle_timeout`` seconds.

docs/core.md ("The life of a link") draws these.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..entities import EntityPath
from ..errors import EntityNameError, ServiceError
from ..sdk.api import ServiceBusReceiveMode
from ..sdk.failures import from_sdk, is_connection_lost
from ..sdk.management import session_browser
from ..sdk.opening import close_now, open_without_sleeps
from .links import LinkPool, StaleLink, quietly, receiver_for, stale
from .loop import LoopThread

if TYPE_CHECKING:
    from ..sdk.spares import SpareConnections
    from .connection import Connection

T = TypeVar("T")
log = logging.getLogger("sbnotebook.live")

IDLE_TIMEOUT = 300.0  # seconds a link may sit unused before it is closed
REAPER_INTERVAL = 15.0  # seconds between the reaper's rounds (at most idle_timeout)


@dataclass
class Generation:
    """One SDK client and what was made for it; ``reconnect()`` ends it and starts no other until
    the next call."""

    client: Any  # azure.servicebus.aio.ServiceBusClient
    own_credential: Any = None  # a DefaultAzureCredential made for this client: closed with it
    spares: SpareConnections | None = None  # AMQP connections opened ahead of need (sdk/spares.py)
    opened_a_link: bool = False  # a client that never reached the broker is not stale: no reconnect

    async def close(self) -> None:
        """Close the client, and with it every handler it made (only once nothing borrows them)."""
        await quietly(self.client.close())
        if self.own_credential is not None:
            await quietly(self.own_credential.close())  # its HTTP session (aiohttp) with it


class LinkPools(LoopThread):
    """The pools, generations, retired clients and reaper of a live connection (see the module
    docstring). A subclass makes the SDK client: ``_new_generation``."""

    settings: Connection

    def __init__(self, name: str, *, idle_timeout: float = IDLE_TIMEOUT) -> None:
        super().__init__(name)
        self.idle_timeout = idle_timeout
        self.links_opened = 0
        self.reconnects = 0
        self._current: Generation | None = None
        self._generation = 0  # generations ended so far (reconnect() ends one)
        self._retired: list[Generation] = []  # ended by reconnect(): closed by close()
        self._pools: dict[tuple[str, str], LinkPool] = {}
        self._reaper: asyncio.Task[None] | None = None

    def _new_generation(self) -> Generation:
        """A new SDK client, and its spares (called on the loop)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ views

    @property
    def open_links(self) -> int:
        return sum(len(p.idle) + len(p.busy) for p in self._pools.values())

    @property
    def spares(self) -> SpareConnections | None:
        """The spare AMQP connections of the current client (None before its first use)."""
        return self._current.spares if self._current is not None else None

    @property
    def generation(self) -> int:
        """Changes with each reconnect: a call that saw the connection lost reconnects only if it is
        unchanged since the call began (another call may have reconnected already)."""
        return self._generation

    # ------------------------------------------------------------------ links

    def sdk_client(self) -> Any:
        """The SDK's async ``ServiceBusClient`` of this connection (made on first use and after a
        reconnect; call on the loop). The first one starts the reaper."""
        if self._current is None:
            self._current = self._new_generation()
            if self._reaper is None:
                self._reaper = asyncio.get_running_loop().create_task(self._reap())
        return self._current.client

    def pool(self, kind: str, path: EntityPath) -> LinkPool:
        """The idle links of one kind ("sender", "receiver", "deleting-receiver", "sessions") for one
        entity: ``acquire`` and ``give_back`` for work that holds a link, else ``link``/``with_link``."""
        key = (kind, str(path).lower())
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = LinkPool(lambda: self._open(kind, path))
        return pool

    async def _open(self, kind: str, path: EntityPath) -> Any:
        client = self.sdk_client()
        generation = self._current
        if kind == "sender":
            if path.subscription is not None or path.sub_queue is not None:
                raise EntityNameError(
                    f"Cannot send to '{path}': send to a queue or a topic. To put a message back from a "
                    "subscription's dead-letter queue without fanning out, use resubmit(..., target=...)."
                )
            link = client.get_queue_sender(path.name)
        elif kind == "sessions":
            self.links_opened += 1
            return session_browser(client, path.name, path.subscription)  # opens on its first request
        elif kind == "deleting-receiver":
            link = receiver_for(client, path, prefetch_count=0, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE)
        else:
            link = receiver_for(client, path, prefetch_count=0)
        try:
            await open_without_sleeps(link, management=kind != "sender")
        except BaseException:
            await quietly(close_now(link))
            raise
        self.links_opened += 1
        if generation is not None:
            generation.opened_a_link = True
        return link

    @asynccontextmanager
    async def link(self, kind: str, path: EntityPath) -> AsyncIterator[Any]:
        """Borrow a link ("sender", "receiver" in peek-lock, "deleting-receiver" in
        receive-and-delete, "sessions") for one operation. A link whose
        connection broke is closed instead of going back to the pool."""
        pool = self.pool(kind, path)
        link, new = await pool.acquire()
        try:
            yield link
        except BaseException as exc:
            if stale(exc, new):
                await pool.give_back_stale(link)
                raise StaleLink(exc) from exc
            await quietly(pool.give_back(link, keep=not is_connection_lost(exc)))
            raise
        else:
            await quietly(pool.give_back(link))

    async def with_link(self, kind: str, path: EntityPath, operation: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``operation(link)``; if the connection was lost, reconnect and try once more."""

        async def once() -> T:
            async with self.link(kind, path) as link:
                return await operation(link)

        return await self.reconnecting(once)

    # ------------------------------------------------------------ generations

    async def reconnecting(self, work: Callable[[], Awaitable[T]], *, after: Callable[[T], None] | None = None) -> T:
        """The one "reconnect once, then retry": run ``work()``; if the connection was lost, reconnect
        and run it once more (only for work that changed nothing when it failed), calling ``after``
        with the second result. A second loss is one of the kit's errors. Work that failed on a
        client another call has already replaced retries without reconnecting again: one outage,
        one reconnect, however many calls saw it."""
        generation = self._generation
        try:
            return await work()
        except StaleLink as first:
            # Not a lost connection: a link of a deleted entity, closed; once more on a new link.
            log.info("a link of %s was detached (%s): opening another", self.settings, from_sdk(first.cause).message)
        except Exception as first:
            if not is_connection_lost(first):
                raise
            await self.reconnect_if_stale(generation, why=first)
        try:
            result = await work()
        except StaleLink as second:
            raise second.cause from None  # the entity is gone again: its own error
        except Exception as second:
            if not is_connection_lost(second):
                raise
            raise ServiceError(
                f"Lost the connection to {self.settings} and could not reconnect: {from_sdk(second).message}",
                retryable=True,
            ) from None
        if after is not None:
            after(result)
        return result

    async def reconnect_if_stale(self, generation: int, *, why: BaseException) -> bool:
        """Reconnect after a call that began in ``generation`` lost the connection, unless that is
        no longer needed: another call has reconnected since (``generation`` changed), or the
        current client has never opened a link (made after the outage began: replacing it would
        only make another that cannot connect either). One outage, one reconnect."""
        current = self._current
        if self._generation != generation or current is None or not current.opened_a_link:
            return False
        await self.reconnect(why=why)  # logged there, with why
        return True

    async def reconnect(self, *, why: BaseException | None = None) -> None:
        """End the current generation: close every idle link and the spare connections, and start
        a new client on the next call.

        The old client is retired, not closed: closing an SDK client shuts down every handler it
        made, and links borrowed from it (a send being retried, a scan's receivers, another call's
        link) would fail mid-operation with "the handler has already been shutdown". Their holders
        close them; ``close()`` closes the retired clients."""
        self._generation += 1
        self.reconnects += 1
        log.info("reconnecting to %s (%s)", self.settings, from_sdk(why).message if why else "asked")
        await self._end_generation()

    async def _end_generation(self) -> None:
        links = [link for pool in self._pools.values() for link in pool.take_idle()]
        self._pools.clear()  # busy links are closed by whoever holds them
        ended, self._current = self._current, None
        if ended is not None:
            self._retired.append(ended)
            spares, ended.spares = ended.spares, None
            if spares is not None:
                await spares.close()
        await asyncio.gather(*(quietly(close_now(link)) for link in links))

    async def _reap(self) -> None:
        """The reaper: closes the links idle for ``idle_timeout`` seconds, every round."""
        while True:
            await asyncio.sleep(min(REAPER_INTERVAL, self.idle_timeout))
            links = [link for pool in self._pools.values() for link in pool.take_idle(self.idle_timeout)]
            await asyncio.gather(*(quietly(close_now(link)) for link in links))

    async def _close_links(self) -> None:
        """At close: stop the reaper, close every link (borrowed ones too: left open, their
        keep-alive tasks die with the loop, "Task was destroyed but it is pending"), end the
        generation, and close the retired clients and with them every handler still open on them."""
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        borrowed = [link for pool in self._pools.values() for link in pool.busy.values()]
        await self._end_generation()
        await asyncio.gather(*(quietly(close_now(link)) for link in borrowed))
        retired, self._retired = self._retired, []
        for generation in retired:
            await generation.close()
