"""Receiving: ``receive`` and ``receive_deferred`` return a :class:`~sbnotebook.core.operations.batch.LockedBatch`
holding a receiver of the live connection (``batch.py`` renews, settles and gives back);
``receive_batch`` is the body both share, and ``fetch_batch`` the receive of up to ``count``
messages on one link, which in receive-and-delete mode also waits for those already on their way.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from typing import Any

from ..connections.links import StaleLink, receiver_for, stale
from ..connections.live import LiveConnection
from ..connections.registry import ConnectionLike, live
from ..defaults import (
    MAX_IN_FLIGHT,
    MAX_RENEWAL_SECONDS,
    RECEIVE_MAX_MESSAGES,
    WAIT_SECONDS,
    check_max_in_flight,
    check_whole_number,
)
from ..entities import EntityPath
from ..errors import InvalidInputError
from ..renames import deprecated, renamed
from ..sdk.api import ServiceBusReceiveMode
from ..sdk.failures import from_sdk, is_connection_lost
from ..sdk.opening import close_now, open_without_sleeps
from ..sdk.receiver import DRAIN_TIMEOUT, drain_credit, forget_deliveries, has_credit, receive_now, revoke_credit
from ..tracing import operation
from .batch import LockedBatch, Mode

OLD_MODES: dict[str, Mode] = {"peek-lock": "peek_lock", "receive-and-delete": "receive_and_delete"}

log = logging.getLogger("sbnotebook.receive")


# ------------------------------------------------------------------- API


def _check(count: int, wait: float, max_in_flight: int) -> None:
    check_whole_number(count, "max_messages")
    if not isinstance(wait, (int, float)) or wait < 0:
        raise InvalidInputError("wait_seconds must be 0 seconds or more.")
    check_max_in_flight(max_in_flight)


async def fetch_batch(rcv: Any, count: int, wait: float, *, deletes: bool = False) -> list[Any]:
    """Up to ``count`` messages; the receiver is left with no credit. ``deletes``: a
    receive-and-delete receiver, whose messages are gone from Service Bus once sent, so the
    receive also waits for those already on their way (see ``sdk.drain_credit``), and a failure
    after some arrived returns them (logged) instead of raising: nobody could receive them again."""
    try:
        return await _fetch(rcv, count, wait, deletes)
    finally:
        if deletes:
            forget_deliveries(rcv)  # pre-settled: the link would keep every tag while pooled


async def _fetch(rcv: Any, count: int, wait: float, deletes: bool) -> list[Any]:
    out: list[Any] = []
    try:
        # What is there now first: a drain, one round trip whatever the latency and however many
        # are there (sdk.receive_now). None there: wait up to `wait` for the first messages, then
        # take only what is there now after them, so that no lock ticks away before the batch (and
        # its renewal) exists.
        await receive_now(rcv, count, out)
        if not out and wait > 0:  # at least half a second: a shorter wait may not outlast the round trip
            out.extend(await rcv.receive_messages(max_message_count=count, max_wait_time=max(wait, 0.5)))
            if out and len(out) < count:
                await receive_now(rcv, count - len(out), out)
        if not deletes:
            await revoke_credit(rcv)  # the link may stay open (pooled, or held with a session or a batch)
            return out
        before = len(out)
        confirmed = await drain_credit(rcv, out)
    except Exception as exc:
        if not (deletes and out):
            raise
        log.warning(
            "A receive-and-delete failed after %d message(s) had been received and removed (%s): they are "
            "returned; any still on their way are lost.",
            len(out),
            from_sdk(exc).message,
        )
        return out
    if len(out) > before:
        log.info("%d receive-and-delete message(s) arrived after the wait ended: returned too", len(out) - before)
    if not confirmed:
        log.warning(
            "Service Bus did not confirm within %.0f s that no more receive-and-delete messages were on their "
            "way; any that arrive after this are lost. Check the connection.",
            DRAIN_TIMEOUT,
        )
    return out


async def receive_batch(
    conn: LiveConnection,
    path: EntityPath,
    *,
    count: int,
    wait: float,
    mode: Mode = "peek_lock",
    max_in_flight: int = MAX_IN_FLIGHT,
    auto_renew: bool = True,
    max_renewal_seconds: float = MAX_RENEWAL_SECONDS,
    session_id: str | None = None,
    sequence_numbers: list[int] | None = None,
) -> LockedBatch:
    """The body of ``receive`` and ``receive_deferred`` (their defaults), on the connection's loop."""
    deletes = mode == "receive_and_delete"
    pooled = session_id is None
    if pooled:
        pool = conn.pool("deleting-receiver" if deletes else "receiver", path)
        rcv, new = await pool.acquire()
    else:
        # A session receiver holds its session: it is closed with the batch.
        kwargs: dict[str, Any] = {"prefetch_count": 0, "session_id": session_id, "max_wait_time": max(wait, 0.5)}
        if deletes:
            kwargs["receive_mode"] = ServiceBusReceiveMode.RECEIVE_AND_DELETE
        rcv = receiver_for(conn.sdk_client(), path, **kwargs)
    asked_at = dt.datetime.now(dt.UTC)  # the locks run from about now: their length (LockedBatch)
    try:
        if not pooled:
            await open_without_sleeps(rcv)
            conn.links_opened += 1
            asked_at = dt.datetime.now(dt.UTC)
        if sequence_numbers is not None:
            messages = list(await rcv.receive_deferred_messages(sequence_numbers))
        else:
            messages = await fetch_batch(rcv, count, wait, deletes=deletes)
    except BaseException as exc:
        # A receive-and-delete link that may still have credit out goes: idle, it would take
        # messages with nobody to hand them to.
        if pooled and stale(exc, new):
            await pool.give_back_stale(rcv)
            raise StaleLink(exc) from exc  # its entity was deleted under it: once more on a new link
        if pooled:
            await pool.give_back(rcv, keep=not is_connection_lost(exc) and not (deletes and has_credit(rcv)))
        else:
            await close_now(rcv)
        raise
    if deletes:
        # The batch holds no lock, so no receiver. Drained (no credit, nothing on its way), the
        # link is safe to keep for the next call: opening one costs about 0.5 s.
        if pooled:
            await pool.give_back(rcv, keep=not has_credit(rcv))
        else:
            await close_now(rcv)
        rcv = None
    return LockedBatch(
        conn,
        str(path),
        mode,
        rcv,
        messages,
        max_in_flight=max_in_flight,
        auto_renew=auto_renew,
        max_renewal_seconds=max_renewal_seconds,
        session=session_id is not None,
        pooled=pooled,
        asked_at=asked_at,
    )


def _run_receive(conn: LiveConnection, path: EntityPath, **kwargs: Any) -> LockedBatch:
    with operation("receive", conn, path) as span:
        batch = conn.run_on(path, conn.reconnecting(lambda: receive_batch(conn, path, **kwargs)))
        span.count(len(batch))
        if kwargs.get("sequence_numbers") is not None:
            span.attribute("sbnotebook.deferred", True)
    return batch


@renamed(count="max_messages", wait="wait_seconds", max_renewal="max_renewal_seconds")
def receive(
    entity: str | EntityPath,
    *,
    max_messages: int = RECEIVE_MAX_MESSAGES,
    mode: Mode = "peek_lock",
    wait_seconds: float = WAIT_SECONDS,
    max_in_flight: int = MAX_IN_FLIGHT,
    auto_renew: bool = True,
    max_renewal_seconds: float = MAX_RENEWAL_SECONDS,
    session_id: str | None = None,
    connection: ConnectionLike = None,
) -> LockedBatch:
    """Receive up to ``max_messages`` messages: what is there now (one round trip), or when none are,
    the first to come within ``wait_seconds`` and what is there after them (``0``: what is there now).
    While the batch is open its locks are renewed (``auto_renew``) for at most ``max_renewal_seconds``.

    ``mode="receive_and_delete"`` removes them from Service Bus as they are delivered:
    if this process dies before the work is done, they are gone (at-most-once).
    """
    path = EntityPath.parse(entity)
    if mode in OLD_MODES:  # kept for one release (docs/names.md): a value is snake_case, as every other
        deprecated(f"core.receive(mode={mode!r})", f"core.receive(mode={OLD_MODES[mode]!r})")
        mode = OLD_MODES[mode]
    if mode not in ("peek_lock", "receive_and_delete"):
        raise InvalidInputError(f"mode must be 'peek_lock' or 'receive_and_delete', not {mode!r}.")
    _check(max_messages, wait_seconds, max_in_flight)
    return _run_receive(
        live(connection),
        path,
        count=max_messages,
        mode=mode,
        wait=wait_seconds,
        max_in_flight=max_in_flight,
        auto_renew=auto_renew,
        max_renewal_seconds=max_renewal_seconds,
        session_id=session_id,
    )


@renamed(max_renewal="max_renewal_seconds")
def receive_deferred(
    entity: str | EntityPath,
    sequence_numbers: Iterable[int],
    *,
    session_id: str | None = None,  # beside the numbers: in a session entity they are found in a session
    max_in_flight: int = MAX_IN_FLIGHT,
    auto_renew: bool = True,
    max_renewal_seconds: float = MAX_RENEWAL_SECONDS,
    connection: ConnectionLike = None,
) -> LockedBatch:
    """Fetch deferred messages by sequence number, locked, for settlement. A number that is not
    (or no longer) deferred fails the request at once with a "message not found" error."""
    path = EntityPath.parse(entity)
    seqs = list(sequence_numbers)
    if not seqs or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in seqs):
        raise InvalidInputError("Give one or more sequence numbers (positive whole numbers).")
    _check(len(seqs), 0, max_in_flight)
    return _run_receive(
        live(connection),
        path,
        count=len(seqs),
        mode="peek_lock",
        wait=0,
        max_in_flight=max_in_flight,
        auto_renew=auto_renew,
        max_renewal_seconds=max_renewal_seconds,
        session_id=session_id,
        sequence_numbers=seqs,
    )
