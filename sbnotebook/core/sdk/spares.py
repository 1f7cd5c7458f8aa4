"""Spare AMQP connections: the part of the SDK seam (``sdk/``) that opens connections ahead of need.

The SDK opens one AMQP connection per sender or receiver. A new entity paid SASL (2 round trips),
the AMQP open with the session and CBS links (1), the token (1), the attach (1) and the call. A
spare has done everything before the token, so a link lent one costs the token, the attach and
the call.

With a shared access key (a connection string's ``SharedAccessKey``), a spare also holds a token
for the whole namespace (``sb://<namespace>/``), put when it was opened: a SAS token is valid for
every resource whose URI starts with the token's (Microsoft's "Service Bus access control with
Shared Access Signatures"), so a link lent a covered spare costs the attach and the call. The client's own token is put
when the namespace token nears its end, by the SDK's own refresh. A key the service refuses for a
whole namespace (a key of one entity's policy) is logged once, and spares are no longer covered.
Tokens from Microsoft Entra ID or a fixed SAS token are always put per link.

The private SDK names used here are listed in ``sdk.USED_BY``;
``SPARE_OPEN_TAIL`` pins the lines of the SDK's open that ``_give`` repeats.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from .failures import sign_in_failure

log = logging.getLogger("sbnotebook.core.sdk")

# What ``open_async`` does after making its connection, session and CBS authenticator, which
# ``_give`` does for a spare; tests/core/sdk/test_spares.py fails when the SDK's
# ``AMQPClientAsync.open_async`` no longer contains each of these lines.
SPARE_OPEN_TAIL: tuple[str, ...] = (
    "if self._session:",
    "self._session = self._connection.create_session(",
    "self._cbs_authenticator = CBSAuthenticator(",
    'self._network_trace_params["amqpConnection"] = self._connection._container_id',
    'self._network_trace_params["amqpSession"] = self._session.name',
    "self._shutdown = False",
    "self._keep_alive_thread = asyncio.ensure_future(self._keep_alive_async())",
)

SPARE_OPEN_TIMEOUT = 30.0  # seconds for a spare's connection, session and CBS links to open
SPARE_KEEP_INTERVAL = 10.0  # seconds between reads on idle spares (heartbeats; a closed one is dropped)
SPARE_RETRY_AFTER = 30.0  # seconds before opening spares again after one failed to open
# Credentials that sign a token for any resource: a namespace-wide one can be made from them.
KEY_CREDENTIALS = ("ServiceBusSharedKeyCredential", "ServiceBusAzureNamedKeyCredential")
NAMESPACE_TOKEN_MARGIN = 300  # seconds of life a spare's namespace token must have left to be used


class _Spare:
    def __init__(self, signature: tuple[Any, ...], connection: Any, session: Any, cbs: Any) -> None:
        self.signature = signature
        self.connection = connection
        self.session = session
        self.cbs = cbs
        self.reading = False  # the keeper is reading its frames: not to be lent meanwhile
        self.covered_until = 0  # when its namespace-wide token ends (epoch seconds); 0: it has none

    def covered(self) -> bool:
        """Whether its namespace-wide token has enough life left to serve a new link."""
        return self.covered_until - time.time() > NAMESPACE_TOKEN_MARGIN

    def usable(self) -> bool:
        from azure.servicebus._pyamqp.constants import CbsState, ConnectionState

        return (
            not self.reading
            and self.connection._error is None  # a failed read leaves the state as it was
            and self.connection.state == ConnectionState.OPENED
            and self.cbs.state == CbsState.OPEN
        )

    async def close(self) -> None:
        await self.connection.close()


def _signature(amqp: Any) -> tuple[Any, ...]:
    """What must be equal for a spare made from one AMQP client to serve another."""
    proxy = amqp._http_proxy
    return (
        amqp._hostname,
        amqp._use_tls,
        amqp._transport_type,
        amqp._custom_endpoint_address,
        tuple(sorted(proxy.items())) if proxy else None,
        amqp._max_frame_size,
        amqp._channel_max,
        amqp._idle_timeout,
        amqp._socket_timeout,
        amqp._incoming_window,
        amqp._outgoing_window,
        type(amqp._auth.sasl),
    )


class SpareConnections:
    """AMQP connections opened ahead of need, for the SDK clients made on one event loop.

    The SDK opens an AMQP connection per sender or receiver: a new entity paid SASL (2 round trips),
    the AMQP open, session begin and CBS attaches (1), the token (1), the link (1), then the call.
    A spare has done everything before the token: a client lent one puts its token, attaches and
    calls (3 round trips for a first peek). The spare becomes the client's own: the client closes
    it as it would have closed its own connection, and one more spare is opened in the background.

    At most ``size`` wait ready; the keeper reads their frames every ``SPARE_KEEP_INTERVAL``
    (heartbeats, and a connection the service closed is dropped). A spare that fails to open is
    logged once and none is opened for ``SPARE_RETRY_AFTER`` seconds: the clients open their own.
    Call everything on the loop."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.lent = 0
        self.failures = 0  # spares that could not be opened
        self.dropped = 0  # spares found closed (by the service, the network) and never lent
        self.covered = 0  # spares that held a namespace-wide token when lent (no token put per link)
        self._namespace_auth: Callable[[], Awaitable[Any]] | None = None  # makes that token's auth
        self._namespace_refused = False
        self._ready: list[_Spare] = []
        self._opening: set[asyncio.Task[None]] = set()
        self._template: Any = None  # an AMQP client whose settings spares are made with
        self._template_signature: tuple[Any, ...] = ()
        self._keeper: asyncio.Task[None] | None = None
        self._paused_until = 0.0
        self._logged = False
        self._closed = False

    @property
    def ready(self) -> int:
        return len(self._ready)

    def use_on_this_loop(self) -> SpareConnections:
        """Let every client made on the running loop (``without_sleeps``) open on these spares."""
        spares_of_loop[asyncio.get_running_loop()] = self
        return self

    def lend(self, amqp: Any, handler: Any = None) -> bool:
        """Make ``amqp`` (an SDK AMQP client, not yet open, made by ``handler``) open on a ready
        spare, if there is one made with the same settings; open more in the background. Returns
        whether one was lent."""
        from azure.servicebus._pyamqp.constants import AUTH_TYPE_CBS

        if self._closed or getattr(amqp._auth, "auth_type", None) != AUTH_TYPE_CBS:
            return False
        if handler is not None and self._namespace_auth is None:
            self._namespace_auth = _namespace_auth(handler)
        signature = _signature(amqp)
        if self._template is None or self._template_signature != signature:
            self._use_template(amqp, signature)  # the settings the next spares are made with
        spare = next((s for s in self._ready if s.signature == signature and s.usable()), None)
        if spare is not None:
            self._ready.remove(spare)
            self.covered += _give(amqp, spare)
            self.lent += 1
        self.refill()
        return spare is not None

    async def check(self, receiver: Any) -> None:
        """Open a spare made for ``receiver`` (an async SDK receiver, not opened) and put its token
        on it: the namespace answers and accepts the key or credential, in the round trips of a
        spare and one more for the token, with no link attached. Raises the SDK's exception for
        what went wrong; the spare is kept for the next link."""
        from azure.servicebus.aio._async_utils import create_authentication

        receiver._create_handler(await create_authentication(receiver))
        amqp = receiver._handler
        self._use_template(amqp, _signature(amqp))
        self._namespace_auth = self._namespace_auth or _namespace_auth(receiver)
        spare = None
        try:
            spare = await asyncio.wait_for(_open_spare(amqp), SPARE_OPEN_TIMEOUT)
            if not await self._cover(spare, amqp):  # the namespace's token checks the key as well
                await asyncio.wait_for(_put_token(spare, amqp._auth, amqp), SPARE_OPEN_TIMEOUT)
        except BaseException as exc:  # cancelled too: the spare is closed, not dropped open
            if spare is not None:
                await _close_quietly(spare)
            if isinstance(exc, Exception):
                raise _sdk_error(receiver, exc) from None
            raise
        self._ready.append(spare)
        self.refill()

    def _use_template(self, amqp: Any, signature: tuple[Any, ...]) -> None:
        self._template, self._template_signature = amqp, signature

    def refill(self) -> None:
        loop = asyncio.get_running_loop()
        if self._closed or self._template is None or loop.time() < self._paused_until:
            return
        for _ in range(self.size - len(self._ready) - len(self._opening)):
            task = loop.create_task(self._open_one(self._template))
            self._opening.add(task)
            task.add_done_callback(self._opening.discard)
        if self._keeper is None:
            self._keeper = loop.create_task(self._keep())

    async def _open_one(self, template: Any) -> None:
        spare = None
        try:
            spare = await asyncio.wait_for(_open_spare(template), SPARE_OPEN_TIMEOUT)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the client opens its own connection instead; said once
            self.failures += 1
            self._paused_until = asyncio.get_running_loop().time() + SPARE_RETRY_AFTER
            if not self._logged:
                self._logged = True
                log.info("could not open a spare AMQP connection (%s): new links open their own", type(exc).__name__)
            return
        if not self._closed:
            try:
                await self._cover(spare, template)
            except asyncio.CancelledError:
                # Cancelled by close() while its token is put: nobody else has it, so it is closed
                # here (dropped open, its socket or aiohttp session was left to the collector).
                await _close_quietly(spare)
                raise
            except Exception as exc:  # the connection failed: the keeper drops it
                log.debug("a namespace token on a spare AMQP connection failed: %r", exc)
        if self._closed:
            await _close_quietly(spare)
            return
        self._ready.append(spare)

    async def _cover(self, spare: _Spare, template: Any) -> bool:
        """Put a namespace-wide token on ``spare`` (see the module docstring); whether it holds one.
        A refusal is logged once, and no spare is covered from then on."""
        if self._namespace_auth is None or self._namespace_refused:
            return False
        from azure.servicebus._pyamqp.error import TokenAuthFailure

        try:
            auth = await self._namespace_auth()
            await asyncio.wait_for(_put_token(spare, auth, template), SPARE_OPEN_TIMEOUT)
        except TokenAuthFailure as exc:
            if self._namespace_refused:  # another spare, opening at the same time, was refused first
                return False
            self._namespace_refused = True
            log.info(
                "the service refused a token for the whole namespace (%s: a key of one entity's policy,"
                " or a wrong key): each new link puts its own (one round trip more on a new entity)",
                exc.status_code,
            )
            return False
        spare.covered_until = int(spare.cbs._expires_on or 0)
        return True

    async def _keep(self) -> None:
        while not self._closed:
            await asyncio.sleep(SPARE_KEEP_INTERVAL)
            for spare in list(self._ready):
                spare.reading = True
                try:
                    await spare.connection.listen(wait=False)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # closed by the service or the network: dropped, not lent
                    log.debug("dropping a spare AMQP connection: %r", exc)
                finally:
                    spare.reading = False
                if not spare.usable() and spare in self._ready:
                    self._ready.remove(spare)
                    self.dropped += 1
                    await _close_quietly(spare)
            self.refill()

    async def settle(self) -> None:
        """Wait for the spares being opened."""
        await asyncio.gather(*self._opening, return_exceptions=True)

    async def close(self) -> None:
        """Close every spare and stop opening more."""
        self._closed = True
        tasks = [*self._opening, *([self._keeper] if self._keeper is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        spares, self._ready = self._ready, []
        await asyncio.gather(*(_close_quietly(s) for s in spares))
        if spares_of_loop.get(asyncio.get_running_loop()) is self:
            del spares_of_loop[asyncio.get_running_loop()]


async def _close_quietly(spare: _Spare) -> None:
    try:
        await spare.close()
    except Exception as exc:  # closing a connection that is already gone
        log.debug("closing a spare AMQP connection: %r", exc)


async def _open_spare(template: Any) -> _Spare:
    """A connection made as ``template``'s ``open_async`` would make it, with its session begun and
    its CBS links attached (no token yet: that is the lending client's)."""
    from azure.servicebus._pyamqp.aio._cbs_async import CBSAuthenticator
    from azure.servicebus._pyamqp.aio._connection_async import Connection
    from azure.servicebus._pyamqp.constants import CbsState

    t = template
    connection = Connection(
        ("amqps://" if t._use_tls else "amqp://") + t._hostname,
        sasl_credential=t._auth.sasl,
        ssl_opts=t._ssl_opts,
        max_frame_size=t._max_frame_size,
        channel_max=t._channel_max,
        idle_timeout=t._idle_timeout,
        properties=t._properties,
        network_trace=t._network_trace,
        transport_type=t._transport_type,
        http_proxy=t._http_proxy,
        custom_endpoint_address=t._custom_endpoint_address,
        socket_timeout=t._socket_timeout,
        use_tls=t._use_tls,
    )
    try:
        await connection.open()
        session = connection.create_session(incoming_window=t._incoming_window, outgoing_window=t._outgoing_window)
        await session.begin()
        cbs = CBSAuthenticator(session=session, auth=t._auth, auth_timeout=t._auth_timeout)
        await cbs.open()
        while cbs.state != CbsState.OPEN:
            if cbs.state in (CbsState.ERROR, CbsState.CLOSED):
                raise ConnectionError("the service refused the CBS links")
            await connection.listen(wait=t._socket_timeout)
    except BaseException:
        await connection.close()
        raise
    return _Spare(_signature(t), connection, session, cbs)


def _sdk_error(handler: Any, exc: Exception) -> Exception:
    """The SDK's exception for what pyamqp raised; a refused token keeps the service's status and
    description (the SDK's mapping keeps neither: "Service Bus has encountered an error")."""
    from azure.servicebus._pyamqp.error import TokenAuthFailure
    from azure.servicebus.exceptions import ServiceBusAuthenticationError

    if isinstance(exc, TokenAuthFailure):
        description = exc.status_description
        if isinstance(description, bytes):
            description = description.decode("utf-8", "replace")
        return ServiceBusAuthenticationError(message=f"The token was refused ({exc.status_code}): {description}")
    if sign_in_failure(exc) is not None:
        # The credential got no token: the SDK's mapping would log its whole traceback first
        return ServiceBusAuthenticationError(message=str(exc), error=exc)
    return handler._amqp_transport.create_servicebus_exception(log, exc)


async def _put_token(spare: _Spare, auth: Any, amqp: Any) -> None:
    """Put ``auth``'s token on the spare's CBS link (with ``amqp``'s timeouts) and wait for the
    answer (raises on a refusal)."""
    from azure.servicebus._pyamqp.constants import CbsAuthState

    spare.cbs._auth = auth
    spare.cbs._auth_timeout = amqp._auth_timeout
    spare.cbs.auth_state = CbsAuthState.IDLE
    while not await spare.cbs.handle_token():  # puts it, then reads frames until it is answered
        await spare.connection.listen(wait=amqp._socket_timeout)


def _namespace_auth(handler: Any) -> Callable[[], Awaitable[Any]] | None:
    """How to make the auth of a token for ``handler``'s whole namespace, as the SDK makes a link's
    (``create_authentication``), when its credential is a key (None otherwise)."""
    credential: Any = getattr(handler, "_credential", None)
    if type(credential).__name__ not in KEY_CREDENTIALS:
        return None
    from azure.servicebus._common.constants import TOKEN_TYPE_SASTOKEN

    uri = f"sb://{handler.fully_qualified_namespace}/"
    transport, config = handler._amqp_transport, handler._config

    async def make() -> Any:
        return await transport.create_token_auth_async(
            uri,
            get_token=functools.partial(credential.get_token, uri),
            token_type=TOKEN_TYPE_SASTOKEN,
            config=config,
            update_token=True,
        )

    return make


def _give(amqp: Any, spare: _Spare) -> bool:
    """Hand ``spare`` to ``amqp`` (an SDK AMQP client, not yet open): its connection, session and
    CBS authenticator become the client's now, so whatever comes next, the open or a close when
    the open never comes (a deadline passed), ends them with the client (its close closes the
    connection: not an external one). Its ``open_async`` then does, once, only what the SDK's does
    after making them (``SPARE_OPEN_TAIL``); a later reopen of the client is the SDK's own.
    Returns whether the spare's namespace-wide token serves the client (no token of its own put
    until that one nears its end)."""
    from azure.servicebus._pyamqp.constants import CbsAuthState

    covered = spare.covered()
    spare.cbs._auth = amqp._auth  # this client's token: put at its first use, or at the refresh
    spare.cbs._auth_timeout = amqp._auth_timeout
    if not covered:
        spare.cbs.auth_state = CbsAuthState.IDLE  # a token put before (a check's) is not this client's
    amqp._connection = spare.connection
    amqp._session = spare.session
    amqp._cbs_authenticator = spare.cbs

    async def open_async(connection: Any = None) -> None:
        del amqp.open_async  # the class's own from now on
        amqp._network_trace_params["amqpConnection"] = spare.connection._container_id
        amqp._network_trace_params["amqpSession"] = spare.session.name
        amqp._shutdown = False
        if amqp._keep_alive_interval:
            amqp._keep_alive_thread = asyncio.ensure_future(amqp._keep_alive_async())

    amqp.open_async = open_async
    return covered


spares_of_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SpareConnections] = weakref.WeakKeyDictionary()
