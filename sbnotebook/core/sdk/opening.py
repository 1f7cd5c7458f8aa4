"""The SDK boundary at a handler's open and close: opened without the SDK's sleeps, closed without its keep-alive's.

- ``without_sleeps`` / ``open_without_sleeps``: the SDK's ``_open`` polls ``client_ready_async()``
  and sleeps 50 ms after each False; here the AMQP client it creates reads frames until it is
  ready, with the entity's ``$management`` link attached in the same flight. On a loop with spare
  AMQP connections (``spares.py``), the new client is lent one here.
- ``close_now``: a sender or receiver closed without waiting out its keep-alive's one-second sleep;
  the AMQP client a handler makes here closes that way too when the SDK closes it itself (an open
  that fails or is cancelled).
- a session receiver refused a session this process gave back a moment ago tries again
  (``RELEASE_GRACE``): the SDK sends the detach without waiting for its answer.

What it reaches into: a handler's ``_create_handler`` (async receiver, sender, session browser),
the ``client_ready_async`` of the AMQP client that makes, and the client's keep-alive task;
``POLLING_OPENS`` pins the SDK methods whose shape this relies on (tests/core/sdk/test_open.py), and
``sdk.USED_BY`` lists the names.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .spares import spares_of_loop

log = logging.getLogger("sbnotebook.core.sdk")

# SDK methods whose shape ``open_without_sleeps`` relies on: each creates its AMQP client with
# ``self._create_handler`` and then polls ``client_ready_async()``, sleeping 50 ms while it says
# False. tests/core/sdk/test_open.py reads their source and fails when that is no longer so.
POLLING_OPENS: tuple[str, ...] = (
    "azure.servicebus.aio._servicebus_receiver_async.ServiceBusReceiver._open",
    "azure.servicebus.aio._servicebus_sender_async.ServiceBusSender._open",
    "azure.servicebus.aio._session_browser_async._SessionBrowserAsync._open",
)


def without_sleeps(handler: Any, *, management: bool = True) -> Any:
    """Make ``handler`` (an async SDK receiver, sender or session browser) open without sleeping.

    The SDK's ``_open`` creates its AMQP client and then polls ``client_ready_async()``; each poll
    handles at most one incoming frame and a False answer costs ``asyncio.sleep(0.05)``. A handshake
    is about nine frames (open, begin, two CBS attaches and a flow, the put-token reply, the link's
    attach and flow), so every first use of an entity paid ~0.45 s whatever the latency. Here the
    client this handler creates gets a ``client_ready_async`` of its own that keeps reading frames
    until the client is ready (each read blocks on the socket until a frame comes: no spinning),
    so the SDK's loop ends at its first poll and everything else in ``_open`` (deadlines, clean-up
    on failure, session lock renewal, a sender's size limits) stays the SDK's.

    With ``management``, the entity's ``$management`` link is attached as soon as the token is
    accepted, in the same flight as the entity's own link: the first peek, renew or settlement by
    lock token then costs its own round trip only (the SDK attaches it on the first request and
    waits one round trip more). Applies to every later (re)open of this handler. Returns it."""
    create = handler._create_handler
    if getattr(create, "_sbnotebook_without_sleeps", False):
        return handler

    def create_handler(auth: Any) -> None:
        create(auth)
        amqp = handler._handler
        node = handler._mgmt_target.encode(handler._config.encoding) if management else None
        amqp.client_ready_async = _ready_without_sleeps(amqp, node)
        amqp.close_async = _close_without_keep_alive(amqp)
        spares = spares_of_loop.get(asyncio.get_running_loop())
        if spares is not None:
            spares.lend(amqp, handler)

    create_handler._sbnotebook_without_sleeps = True  # type: ignore[attr-defined]
    handler._create_handler = create_handler
    return handler


def _close_without_keep_alive(amqp: Any) -> Callable[[], Awaitable[None]]:
    """The AMQP client's own close, with its keep-alive task cancelled instead of waited out (it
    sleeps in one-second steps). ``close_now`` does this for the kit's closes; this covers the SDK's
    own: ``_open`` closes the client it made when the open fails or is cancelled. A scan cancels the
    windows it launched ahead once it has found the end, and a window opening its link then took a
    whole second to end: every scan of a 500-message queue took ~1 s whatever the latency."""
    close = amqp.close_async

    async def close_async() -> None:
        await _closed_without_keep_alive(amqp, close)

    return close_async


async def _closed_without_keep_alive(amqp: Any, close: Callable[[], Awaitable[None]]) -> None:
    """Run ``close`` with the AMQP client's keep-alive task taken away first (the SDK's close awaits
    it, and it sleeps in one-second steps), then cancel the task: all that wait was for."""
    keep_alive = getattr(amqp, "_keep_alive_thread", None)
    if keep_alive is not None:
        amqp._keep_alive_thread = None
    try:
        await close()
    finally:
        if keep_alive is not None:
            keep_alive.cancel()
            await asyncio.gather(keep_alive, return_exceptions=True)


def _ready_without_sleeps(amqp: Any, node: bytes | None) -> Callable[[], Awaitable[bool]]:
    polled = amqp.client_ready_async  # the class's own: one frame read per call while not ready
    opened = False

    async def ready() -> bool:
        nonlocal opened
        if opened:  # after the open (a receive's do_work, a token refresh): the SDK's own answer
            return bool(await polled())
        while not await amqp.auth_complete_async():  # reads a frame per False (CBS attach, put-token reply)
            pass
        operation = None
        if node is not None and node not in amqp._mgmt_links:
            from azure.servicebus._pyamqp.aio._management_operation_async import ManagementOperation

            operation = ManagementOperation(amqp._session, endpoint=node)
            await operation.open()  # attach sent now, beside the entity link's
            amqp._mgmt_links[node] = operation  # where mgmt_request_async looks for it
        while not await polled():  # the first call attaches the entity link (if any)
            pass
        if operation is not None:
            while not await operation.ready():
                await amqp._connection.listen(wait=amqp._socket_timeout)
        opened = True
        return True

    return ready


# A session given back (its receiver closed) is free once Service Bus has read the detach, which
# the SDK sends without waiting for the answer. A call that accepts the same session right after,
# on another connection, can reach the broker first and be told the session is locked: by us. An
# accept refused within this many seconds of our own give-back is tried again.
RELEASE_GRACE = 2.0
RELEASE_RETRY_PAUSE = 0.05
_released: dict[tuple[str, str, str], float] = {}  # session -> when this process gave it back


def _session_key(handler: Any, session_id: Any) -> tuple[str, str, str] | None:
    if session_id is None or not isinstance(session_id, str):  # none, or the next available one
        return None
    return (str(handler.fully_qualified_namespace).lower(), str(handler._entity_path).lower(), session_id)


def _note_release(handler: Any) -> None:
    """Remember that ``handler`` (about to close) gives its session back, if it holds one (it
    opened: a receiver refused the session holds nothing)."""
    key = _session_key(handler, getattr(handler, "_session_id", None))
    if key is None or handler.session.locked_until_utc is None:  # never accepted: nothing to give back
        return
    now = time.monotonic()
    for old in [k for k, at in _released.items() if now - at > RELEASE_GRACE]:
        del _released[old]
    _released[key] = now


def _just_released(handler: Any) -> bool:
    key = _session_key(handler, getattr(handler, "_session_id", None))
    return key is not None and time.monotonic() - _released.get(key, -RELEASE_GRACE) < RELEASE_GRACE


async def open_without_sleeps(handler: Any, *, management: bool = True) -> Any:
    """Open an async SDK receiver or sender (``async with``'s open) without the SDK's sleeps
    (see :func:`without_sleeps`). Returns the handler. A session receiver refused a session that
    this process gave back a moment ago tries again (``RELEASE_GRACE``)."""
    from azure.servicebus.exceptions import SessionCannotBeLockedError

    without_sleeps(handler, management=management)
    while True:
        try:
            await handler.__aenter__()
            return handler
        except SessionCannotBeLockedError:
            if not _just_released(handler):
                raise
            log.debug("session %s was given back a moment ago: accepting it again", handler._session_id)
            await asyncio.sleep(RELEASE_RETRY_PAUSE)


async def close_now(handler: Any) -> None:
    """Close an SDK sender or receiver without waiting out its keep-alive. The SDK's close detaches
    the link and closes its connection first, then awaits the keep-alive task, which sleeps in
    one-second steps: a receiver closed half a second after it opened (a receive-and-delete call, a
    session held for one operation) took a whole second from open to closed. The task is cancelled
    once the close is done, which is all that wait was for."""
    amqp: Any = getattr(handler, "_handler", None)
    if amqp is not None:
        _note_release(handler)  # a session receiver gives its session back with this close
    await _closed_without_keep_alive(amqp, handler.close)
