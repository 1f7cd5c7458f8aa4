"""A live connection: one SDK client, one event-loop thread, and links kept open between calls.

Opening an SDK sender or receiver costs several round trips (TCP, SASL, AMQP open, CBS token,
link attach) and closing one waits for its keep-alive; doing that per call made every click in a
notebook cost a second. A :class:`LiveConnection` keeps them instead. It is three layers, one job
each:

- the event loop on its own thread (``loop.py``'s ``LoopThread``): the single way the synchronous
  API runs async work (``run``), safe to call from any thread;
- the link pools (``pools.py``'s ``LinkPools``): senders and receivers per entity reused across
  calls, the SDK client's generations (a dropped connection is re-established on the next call,
  once: ``reconnects`` counts it, the log says why, and if the second attempt fails too the error
  says so), the clients they retired and the reaper that closes links idle for ``idle_timeout``;
- the client's lifecycle (this module): the SDK client made with the kit's options and its spare
  AMQP connections (``sdk/spares.py``: the first call on a new entity costs the token, the attach
  and the call), the check that the namespace answers and the key is accepted, the warm-up of
  listed entities in the background, the administration client, and ``close()``.

``registry.py``'s ``connect()`` returns the live connection for a connection's settings; every
core function takes ``connection=`` as a string, settings or a live connection and ends up there,
so calls with the same settings share one live connection per process.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from .. import trust
from ..entities import EntityPath
from ..errors import SbError, ServiceError
from ..renames import deprecated
from ..sdk.api import async_client_class
from ..sdk.encoded import keep_encoded
from ..sdk.failures import from_sdk, is_connection_lost
from ..sdk.spares import SpareConnections
from ..sdk.websockets import transport_options
from .connection import Connection, async_credential, default_credential, tls_port_options
from .links import receiver_for
from .pools import IDLE_TIMEOUT, Generation, LinkPools

T = TypeVar("T")
log = logging.getLogger("sbnotebook.live")

# Seconds one attempt of an SDK operation may take (the SDK's ``try_timeout``; .NET's default
# TryTimeout). Without it the SDK waits for a management reply (peek, renew, deferred receive,
# session state, schedule) forever, and its reply matching registers a request only after sending
# it, so a reply that comes back first is dropped: the call would hang for good instead of failing.
TRY_TIMEOUT = 60.0
WARM_LIMIT = 8  # entities connect() opens a receiver on, in parallel
CHECK_ENTITY = "sbnotebook-connection-check"  # the audience of check()'s token (needs not exist)
# AMQP connections kept open ahead of need (core/sdk/spares.py SpareConnections): two, so that calls one
# after another (a session received and completed, then the next) each find one ready.
SPARE_CONNECTIONS = 2


def tls_context() -> ssl.SSLContext:
    """One TLS context for every connection of the process, trusting the configured CA bundle
    (``trust.py``: SBNOTEBOOK_CA_BUNDLE, SSL_CERT_FILE, REQUESTS_CA_BUNDLE, else certifi's). Without
    it the SDK builds a context and loads a bundle again for each TCP connection, and it opens one
    per link: about 65 ms of CPU each time an entity is first touched (measured;
    tests/core/connections/test_live.py)."""
    return trust.tls_context()


class LiveConnection(LinkPools):
    """One live connection to a namespace (see the module docstring). Create with ``connect()``."""

    def __init__(
        self, settings: Connection, *, idle_timeout: float = IDLE_TIMEOUT, try_timeout: float = TRY_TIMEOUT
    ) -> None:
        super().__init__("sbnotebook-live", idle_timeout=idle_timeout)
        self.settings = settings
        self.try_timeout = try_timeout
        self.entity_changes = 0  # entities created or deleted through the kit: caches of names list again
        self._warming: asyncio.Task[None] | None = None
        self._admin: Any = None
        self._admin_lock = threading.Lock()
        self._logged: set[str] = set()
        self.warmed = False
        self.traced = False  # the SDK's own tracing on for this connection's clients (connect(trace=True))
        # The last sequence number a peek saw at each entity's end (a page shorter than asked): where a
        # window to the end looks first next time (window_search.py). A guess: the page checks itself.
        self.ends: dict[EntityPath, int] = {}
        # Where a scan from the start last found each entity's first message, and how densely its first
        # page was numbered: a scan of it again peeks its windows at once (scan.py). A guess: a window
        # that finds its messages elsewhere moves the scan there.
        self.firsts: dict[EntityPath, tuple[int, float]] = {}

    # ------------------------------------------------------------------ views

    @property
    def fully_qualified_namespace(self) -> str:
        return self.settings.fully_qualified_namespace

    @property
    def namespace(self) -> str:
        """The old name of ``fully_qualified_namespace``, kept for one release."""
        deprecated("core.LiveConnection.namespace", "core.LiveConnection.fully_qualified_namespace")
        return self.settings.fully_qualified_namespace

    @property
    def is_emulator(self) -> bool:
        return self.settings.is_emulator

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

    # ---------------------------------------------------------------- client

    def _new_generation(self) -> Generation:
        """The SDK client with the kit's options, and its spare connections (``LinkPools.sdk_client``
        calls this on the loop when there is no client: the first call, and the first after a reconnect)."""
        ServiceBusClient = async_client_class()
        keep_encoded()  # messages received and peeked keep their bytes: a copy keeps their AMQP types
        # retry_total=0: the kit retries itself (sends by policy, everything else once after a
        # reconnect), so a failure is reported in seconds, not after the SDK's own backoff.
        # try_timeout: every attempt ends, in a reply or a retryable timeout (TRY_TIMEOUT).
        tls = not self.is_emulator
        if self.settings.websockets:
            dial = transport_options(self.fully_qualified_namespace, tls=tls)
        else:
            dial = tls_port_options(self.fully_qualified_namespace) if tls else {}
        options: dict[str, Any] = {
            "retry_total": 0,
            "try_timeout": self.try_timeout,
            "ssl_context": tls_context(),
            **dial,
        }
        if self.settings.connection_string is not None:
            generation = Generation(ServiceBusClient.from_connection_string(self.settings.connection_string, **options))
        else:
            host = self.fully_qualified_namespace.rsplit(":", 1)[0]  # host[:port]
            token_credential = async_credential(self.settings.credential)
            generation = Generation(ServiceBusClient(host, token_credential, **options))
            if self.settings.credential is None:  # made here (DefaultAzureCredential): closed here
                generation.own_credential = token_credential
        generation.spares = SpareConnections(SPARE_CONNECTIONS).use_on_this_loop()
        return generation

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
        spares = self.spares
        assert spares is not None  # made with the client
        try:
            probe = receiver_for(client, EntityPath(entity), prefetch_count=0)
            await spares.check(probe)
        except Exception as exc:
            if is_connection_lost(exc):
                raise ServiceError(
                    f"Cannot reach {self.settings}: check the namespace name and the network.", retryable=True
                ) from None
            raise from_sdk(exc) from None

    # ------------------------------------------------------------------ warm

    def warm_in_background(self, max_entities: int = WARM_LIMIT) -> None:
        """Open a receiver (and its management link) on up to ``max_entities`` listed entities, in the
        background, so a first peek or receive on them costs one round trip; returns at once. What
        fails is logged (the key was checked by ``check``). ``close()`` stops it."""
        self.warmed = True
        self._warming = self.run(self._start(self._warm_listed(max_entities)))

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
        spares = self.spares
        if spares is not None:
            await spares.settle()

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
        from ..sdk.admin import admin_client

        with self._admin_lock:
            if self._admin is None:
                self._admin = admin_client(
                    connection_string=self.settings.connection_string,
                    namespace=self.fully_qualified_namespace,
                    emulator=self.is_emulator,
                    credential=None
                    if self.settings.connection_string
                    else (self.settings.credential or default_credential()),
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
        await self._close_links()

    def __enter__(self) -> LiveConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close_quietly(closable: Any) -> None:
    try:
        closable.close()
    except Exception as exc:
        log.debug("while closing: %r", exc)
