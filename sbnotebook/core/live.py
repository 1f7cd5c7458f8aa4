"""A live connection: one SDK client, one event-loop thread, and links kept open between calls.

Opening an SDK sender or receiver costs several round trips (TCP, SASL, AMQP open, CBS token,
link attach) and closing one waits for its keep-alive; doing that per call made every click in a
notebook cost a second. A :class:`LiveConnection` keeps them instead:

- one ``azure.servicebus.aio.ServiceBusClient``;
- one event loop on its own thread (``core/loop.py``'s ``LoopThread``, which this class extends):
  the single way the synchronous API runs async work (``run``), safe to call from any thread;
- pools of senders and receivers per entity, reused across calls; a link is used by one
  operation at a time, so concurrency is the number of links taken from a pool; links idle for
  ``idle_timeout`` seconds are closed, and everything is closed by ``close()`` and at exit;
- spare AMQP connections, opened ahead of need with their CBS links (``core/sdk_spares.py``
  ``SpareConnections``): the first call on a new entity costs the token, the attach and the call;
- a dropped connection is re-established on the next call, once: ``reconnects`` counts it, the log
  says why, and if the second attempt fails too the error says so.

``connect()`` returns the live connection for a connection's settings; every core function takes
``connection=`` as a string, settings or a live connection and ends up here, so calls with the same
settings share one live connection per process.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import ssl
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from . import trust
from .connection import Connection, async_credential, credential, explicit_port, resolve
from .entities import EntityPath
from .errors import ConfigurationError, EntityNameError, SbError, ServiceError, from_sdk, is_connection_lost
from .links import LinkPool, quietly, receiver_for
from .loop import LoopThread
from .sdk_management import session_browser
from .sdk_open import close_now, open_without_sleeps
from .sdk_spares import SpareConnections

T = TypeVar("T")
log = logging.getLogger("sbnotebook.live")

IDLE_TIMEOUT = 300.0  # seconds a link may sit unused before it is closed
# Seconds one attempt of an SDK operation may take (the SDK's ``try_timeout``; .NET's default
# TryTimeout). Without it the SDK waits for a management reply (peek, renew, deferred receive,
# session state, schedule) forever, and its reply matching registers a request only after sending
# it, so a reply that comes back first is dropped: the call would hang for good instead of failing.
TRY_TIMEOUT = 60.0
MAX_LIVE_CONNECTIONS = 16  # per process; the least recently used beyond this is closed
_REAPER_INTERVAL = 15.0
WARM_LIMIT = 8  # entities connect() opens a receiver on, in parallel
CHECK_ENTITY = "sbnotebook-connection-check"  # the audience of check()'s token (needs not exist)
# AMQP connections kept open ahead of need (core/sdk_spares.py SpareConnections): two, so that calls one
# after another (a session received and completed, then the next) each find one ready.
SPARE_CONNECTIONS = 2


def tls_context() -> ssl.SSLContext:
    """One TLS context for every connection of the process, trusting the configured CA bundle
    (``trust.py``: SBNOTEBOOK_CA_BUNDLE, SSL_CERT_FILE, REQUESTS_CA_BUNDLE, else certifi's). Without
    it the SDK builds a context and loads a bundle again for each TCP connection, and it opens one
    per link: about 65 ms of CPU each time an entity is first touched (measured; tests/core/test_live.py)."""
    return trust.tls_context()


class LiveConnection(LoopThread):
    """One live connection to a namespace (see the module docstring). Create with ``connect()``."""

    def __init__(
        self, settings: Connection, *, idle_timeout: float = IDLE_TIMEOUT, try_timeout: float = TRY_TIMEOUT
    ) -> None:
        super().__init__("sbnotebook-live")
        self.settings = settings
        self.idle_timeout = idle_timeout
        self.try_timeout = try_timeout
        self.links_opened = 0
        self.reconnects = 0
        self.entity_changes = 0  # entities created or deleted through the kit: caches of names list again
        self._client: Any = None
        self._own_credential: Any = None  # a DefaultAzureCredential this connection made
        self._spares: SpareConnections | None = None
        self._generation = 0  # clients made so far (reconnect() starts the next)
        self._retired: list[tuple[Any, Any]] = []  # (client, own credential) replaced by reconnect()
        self._warming: asyncio.Task[None] | None = None
        self._pools: dict[tuple[str, str], LinkPool] = {}
        self._admin: Any = None
        self._admin_lock = threading.Lock()
        self._reaper: asyncio.Task[None] | None = None
        self._logged: set[str] = set()
        self.warmed = False

    # ------------------------------------------------------------------ views

    @property
    def namespace(self) -> str:
        return self.settings.namespace

    @property
    def is_emulator(self) -> bool:
        return self.settings.is_emulator

    @property
    def open_links(self) -> int:
        return sum(len(p.idle) + len(p.busy) for p in self._pools.values())

    def __repr__(self) -> str:
        return f"<LiveConnection {self.settings}: {self.open_links} links open, {self.reconnects} reconnects>"

    def info_once(self, key: str, message: str, *args: Any) -> None:
        """Log a degraded path once per live connection (no silent fallback, no log flood)."""
        if key not in self._logged:
            self._logged.add(key)
            log.info(message, *args)

    # ------------------------------------------------------------------- loop

    def run_on(self, path: EntityPath, coro: Coroutine[Any, Any, T]) -> T:
        """``run``, with an SDK error turned into the kit's error for that entity (ours pass as they are)."""
        try:
            return self.run(coro)
        except SbError:
            raise
        except Exception as exc:
            raise from_sdk(exc, entity=str(path)) from None

    async def call_on(self, path: EntityPath, coro: Coroutine[Any, Any, T]) -> T:
        """``call``, with an SDK error turned into the kit's error for that entity (the async twin of ``run_on``)."""
        try:
            return await self.call(coro)
        except SbError:
            raise
        except Exception as exc:
            raise from_sdk(exc, entity=str(path)) from None

    # ------------------------------------------------------------------ links

    def sdk_client(self) -> Any:
        """The SDK's async ``ServiceBusClient`` of this connection (made on first use; call on the loop)."""
        if self._client is None:
            from azure.servicebus.aio import ServiceBusClient

            # retry_total=0: the kit retries itself (sends by policy, everything else once after a
            # reconnect), so a failure is reported in seconds, not after the SDK's own backoff.
            # try_timeout: every attempt ends, in a reply or a retryable timeout (TRY_TIMEOUT).
            options: dict[str, Any] = {
                "retry_total": 0,
                "try_timeout": self.try_timeout,
                "ssl_context": tls_context(),
                **explicit_port(self.namespace, tls=not self.is_emulator),
            }
            if self.settings.connection_string is not None:
                self._client = ServiceBusClient.from_connection_string(self.settings.connection_string, **options)
            else:
                host = self.namespace.rsplit(":", 1)[0] if ":" in self.namespace else self.namespace
                token_credential = async_credential(self.settings.credential)
                self._client = ServiceBusClient(host, token_credential, **options)
                if self.settings.credential is None:  # made here (DefaultAzureCredential): closed here
                    self._own_credential = token_credential
            self._spares = SpareConnections(SPARE_CONNECTIONS).use_on_this_loop()
            if self._reaper is None:
                self._reaper = asyncio.get_running_loop().create_task(self._reap())
        return self._client

    @property
    def spares(self) -> SpareConnections | None:
        """The spare AMQP connections of the current client (None before its first use)."""
        return self._spares

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
            from azure.servicebus import ServiceBusReceiveMode

            link = receiver_for(client, path, prefetch_count=0, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE)
        else:
            link = receiver_for(client, path, prefetch_count=0)
        try:
            await open_without_sleeps(link, management=kind != "sender")
        except BaseException:
            await quietly(close_now(link))
            raise
        self.links_opened += 1
        return link

    @asynccontextmanager
    async def link(self, kind: str, path: EntityPath) -> AsyncIterator[Any]:
        """Borrow a link ("sender", "receiver" in peek-lock, "deleting-receiver" in
        receive-and-delete, "sessions") for one operation. A link whose
        connection broke is closed instead of going back to the pool."""
        pool = self.pool(kind, path)
        link, _ = await pool.acquire()
        try:
            yield link
        except BaseException as exc:
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

    async def reconnecting(self, work: Callable[[], Awaitable[T]], *, after: Callable[[T], None] | None = None) -> T:
        """The one "reconnect once, then retry": run ``work()``; if the connection was lost, reconnect
        and run it once more (only for work that changed nothing when it failed), calling ``after``
        with the second result. A second loss is one of the kit's errors. Work that failed on a
        client another call has already replaced retries without reconnecting again: one outage,
        one reconnect, however many calls saw it."""
        generation = self._generation
        try:
            return await work()
        except Exception as first:
            if not is_connection_lost(first):
                raise
            if self._generation == generation:
                await self.reconnect(why=first)  # logged there, with why
        try:
            result = await work()
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

    @property
    def generation(self) -> int:
        """Changes with each reconnect: a call that saw the connection lost reconnects only if it is
        unchanged since the call began (another call may have reconnected already)."""
        return self._generation

    async def reconnect(self, *, why: BaseException | None = None) -> None:
        """Close every idle link and the spare connections, and start a new client on the next call.

        The old client is retired, not closed: closing an SDK client shuts down every handler it
        made, and links borrowed from it (a send being retried, a scan's receivers, another call's
        link) would fail mid-operation with "the handler has already been shutdown". Their holders
        close them; ``close()`` closes the retired clients."""
        self._generation += 1
        self.reconnects += 1
        log.info("reconnecting to %s (%s)", self.settings, from_sdk(why).message if why else "asked")
        await self._close_links()

    async def _close_links(self, older_than: float | None = None) -> None:
        links = [link for pool in self._pools.values() for link in pool.take_idle(older_than)]
        if older_than is None:
            self._pools.clear()  # busy links are closed by whoever holds them
            if self._client is not None:
                self._retired.append((self._client, self._own_credential))
            self._client, self._own_credential = None, None
            spares, self._spares = self._spares, None
            if spares is not None:
                await spares.close()
        await asyncio.gather(*(quietly(close_now(link)) for link in links))

    async def _close_retired(self) -> None:
        retired, self._retired = self._retired, []
        for client, own in retired:
            await quietly(client.close())
            if own is not None:
                await quietly(own.close())  # its HTTP session (aiohttp) with it

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(min(_REAPER_INTERVAL, self.idle_timeout))
            await self._close_links(older_than=self.idle_timeout)

    # ------------------------------------------------------------------ check

    def check(self, timeout: float = 30.0) -> None:
        """Prove that the namespace answers and accepts the key or credential: a spare AMQP
        connection is opened and a token put on it (SASL, the open, the token: about 4 round
        trips, no link attached). The connection is kept for the next link. Raises the kit's error:
        ``ConfigurationError`` for a refused key, ``ServiceError`` for a namespace out of reach."""
        self.run(self._check(), timeout=timeout)

    async def _check(self) -> None:
        # A connection string for one entity (EntityPath) has a key that signs for that entity only,
        # and the SDK builds no link for another name: the token is put for that entity.
        entity = self.settings.entity_path or CHECK_ENTITY
        client = self.sdk_client()
        assert self._spares is not None  # made with the client
        try:
            probe = receiver_for(client, EntityPath(entity), prefetch_count=0)
            await self._spares.check(probe)
        except Exception as exc:
            if is_connection_lost(exc):
                raise ServiceError(
                    f"Cannot reach {self.settings}: check the namespace name and the network.", retryable=True
                ) from None
            raise from_sdk(exc) from None

    # ------------------------------------------------------------------ warm

    def warm_in_background(self, limit: int = WARM_LIMIT) -> None:
        """Open a receiver (and its management link) on up to ``limit`` listed entities, in the
        background, so a first peek or receive on them costs one round trip; returns at once. What
        fails is logged (the key was checked by ``check``). ``close()`` stops it."""
        self.warmed = True
        self._warming = self.run(self._start(self._warm_listed(limit)))

    @staticmethod
    async def _start(work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(work)

    async def _warm_listed(self, limit: int) -> None:
        try:
            paths = await asyncio.to_thread(self._listed, limit)
        except Exception as exc:
            # A key without Manage rights (or Entra ID with data roles only) cannot list entities.
            self.info_once(
                "warm", "not warming links for %s: cannot list entities (%s)", self.settings, type(exc).__name__
            )
            return
        for path, r in zip(paths, await self._warm(paths), strict=False):
            if isinstance(r, BaseException):
                log.info("could not warm %s: %s", path, from_sdk(r).message)

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until the background work of this connection is done: ``warm_in_background``, and
        the spare connections being opened (tests and benchmarks that count connections or time
        calls)."""
        self.run(self._settle(), timeout=timeout)

    async def _settle(self) -> None:
        if self._warming is not None:
            await asyncio.gather(asyncio.shield(self._warming), return_exceptions=True)
        if self._spares is not None:
            await self._spares.settle()

    def _listed(self, limit: int) -> list[EntityPath]:
        """Up to ``limit`` queues and subscriptions without sessions, from the administration API."""
        admin = self.admin()
        out: list[EntityPath] = []
        for q in admin.list_queues():
            if len(out) >= limit:
                return out
            if not q.requires_session:
                out.append(EntityPath(q.name))
        for t in admin.list_topics():
            for sub in admin.list_subscriptions(t.name):
                if len(out) >= limit:
                    return out
                if not sub.requires_session:
                    out.append(EntityPath(t.name, sub.name))
        return out

    async def _warm(self, paths: list[EntityPath]) -> list[Any]:
        async def one(path: EntityPath) -> None:
            async def op(link: Any) -> None:
                await link.peek_messages(max_message_count=1)  # attaches the management link too

            await self.with_link("receiver", path, op)

        return list(await asyncio.gather(*(one(p) for p in paths), return_exceptions=True))

    # ------------------------------------------------------------------ admin

    def admin(self) -> Any:
        """The administration client (HTTP), created once and shared."""
        from .admin import admin_client

        with self._admin_lock:
            if self._admin is None:
                self._admin = admin_client(
                    connection_string=self.settings.connection_string,
                    namespace=self.namespace,
                    emulator=self.is_emulator,
                    credential=None if self.settings.connection_string else (self.settings.credential or credential()),
                )
            return self._admin

    # ------------------------------------------------------------------ close

    def close(self) -> None:
        """Close every link, the client and the loop thread. A later call opens them again."""
        with self._admin_lock:
            if self._admin is not None:
                _close_quietly(self._admin)
                self._admin = None
        failed = self.stop(self._teardown())
        if failed is not None:  # closing must not raise over a broken connection; it is logged
            log.info("closing %s: %s", self.settings, from_sdk(failed).message)
        self._pools.clear()

    async def _teardown(self) -> None:
        warming, self._warming = self._warming, None
        if warming is not None:
            # Cancelled, and its cancellation waited for, before its links are closed under it: else
            # an open in flight fails on a closed connection, unseen ("Task exception was never
            # retrieved" at exit).
            warming.cancel()
            await asyncio.gather(warming, return_exceptions=True)
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        # Links still borrowed (an open batch, a paused scan) are closed too: left open, their
        # keep-alive tasks die with the loop ("Task was destroyed but it is pending").
        borrowed = [link for pool in self._pools.values() for link in pool.busy.values()]
        await self._close_links()
        await asyncio.gather(*(quietly(close_now(link)) for link in borrowed))
        await self._close_retired()  # and with them every handler still open on them

    def __enter__(self) -> LiveConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close_quietly(closable: Any) -> None:
    try:
        closable.close()
    except Exception as exc:
        log.debug("while closing: %r", exc)


# ---------------------------------------------------------------- registry


class _Registry:
    """One live connection per connection settings per process (least recently used closed first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: OrderedDict[tuple[str, str, str, int], LiveConnection] = OrderedDict()
        self._closes_at_exit = False

    def get(self, settings: Connection) -> LiveConnection:
        key = (settings.kind, settings.namespace, settings.connection_string or "", id(settings.credential))
        evicted: list[LiveConnection] = []
        with self._lock:
            live = self._live.get(key)
            if live is None:
                live = self._live[key] = LiveConnection(settings)
                if not self._closes_at_exit:
                    # Registered with the first connection, not at import: exit handlers run last
                    # registered first, so connections close before an emulator started before them
                    # stops (stopped first, it cut calls still in flight: "Task exception was never
                    # retrieved" at exit, from connect()'s background warm-up).
                    atexit.register(self.close_all)
                    self._closes_at_exit = True
            self._live.move_to_end(key)
            while len(self._live) > MAX_LIVE_CONNECTIONS:
                evicted.append(self._live.popitem(last=False)[1])
        for old in evicted:
            old.close()
        return live

    def forget(self, live: LiveConnection) -> None:
        """Close ``live`` and take it out: the next get for its settings makes a new one."""
        with self._lock:
            for key in [k for k, v in self._live.items() if v is live]:
                del self._live[key]
        live.close()

    def close_all(self) -> None:
        with self._lock:
            lives, self._live = list(self._live.values()), OrderedDict()
        for live in lives:
            live.close()


registry = _Registry()
ConnectionLike = str | Connection | LiveConnection | None


def connect(
    connection: str | Connection | None = None,
    *,
    namespace: str | None = None,
    credential: Any = None,
    warm: bool = True,
) -> LiveConnection:
    """The live connection for these settings (resolved in the documented order: argument,
    ``SERVICEBUS_CONNECTION_STRING``, ``SERVICEBUS_FULLY_QUALIFIED_NAMESPACE``, embedded emulator).

    ``namespace`` is ``FQDN`` or ``FQDN:PORT`` (a port is dialled as given, never replaced by 5671);
    ``credential`` (with ``namespace``) is an azure-core token credential, sync or async, or a
    credential reference (``"callable:package.module:function"``, ``"databricks:NAME"``: see
    core/credentials.py); without it ``DefaultAzureCredential`` signs in.

    With ``warm`` (the default) the first connect checks that the namespace is reachable and the
    key or credential accepted (``LiveConnection.check``: about 4 round trips), then returns while
    receivers open on up to ``WARM_LIMIT`` listed entities in the background, so a first peek on
    them costs one round trip."""
    conn = registry.get(resolve(connection, namespace=namespace, credential=credential))
    if warm and not conn.warmed:
        try:
            conn.check()
        except ConfigurationError:
            # Refused or no token: the next connect starts afresh (DefaultAzureCredential reads the
            # environment again), so fixing AZURE_TENANT_ID in the kernel needs no restart.
            registry.forget(conn)
            raise
        conn.warm_in_background()
    return conn


def live(connection: ConnectionLike) -> LiveConnection:
    """Whatever a caller passed as ``connection=``, as a live connection."""
    if isinstance(connection, LiveConnection):
        return connection
    return registry.get(resolve(connection))


def close_all() -> None:
    """Close every live connection of this process (kernel shutdown does this too)."""
    registry.close_all()
