"""Purging: explicit, fast, and complete (active, deferred and scheduled messages, or a DLQ).

Destructive by name: the notebook layer asks for confirmation before calling it.

Active messages are deleted on the server first (core/incidents/purge/on_server.py):
``batch-delete-messages``, what the portal's purge and the .NET and JS SDKs' ``PurgeMessages`` use,
up to 4,000 per request, a few requests in flight, no body crossing the network. What that leaves is
then taken the slower way, logged once and noted in the Report: deferred messages (fetched by
sequence number), scheduled ones (cancelled), messages locked by a receiver at the time, sessions
the server did not empty, and everything when the service refuses batch delete (partitioned
entities, an older emulator).

A session-enabled queue or subscription refuses a receiver without a session (Service Bus says so
when the link attaches, peeks included), so it is purged session by session: each listed session is
accepted on one peek-lock receiver, scanned, emptied (received or fetched, then completed) and
given back. A session another receiver holds cannot be accepted: it is left as it is, never waited
for, and its messages are reported as left (counted by the broker) with that reason, or, for a
named session (which cannot be read while held, so not counted), as an error of the report. A
session whose purge fails otherwise (its lock lost, its link detached, a timeout) is no message
either: what it still holds is counted at the end as left, with that failure as the reason.
Service Bus lists only sessions with available messages or session state, so a session holding
nothing but deferred or scheduled messages is purged only when named (``session_ids=``); a purge
that leaves messages behind says so in its report.

Every purge ends by reading what the broker still holds: a scan (peek) of the entity, or, where a
peek needs a session, the administration API's counts. Each message of a kind the purge was asked
to remove that is still there gets one ``left`` outcome (a problem: ``report.ok`` is False) saying
why: locked by another receiver (with when the locks end), arrived while the purge ran, or still
there for a reason the broker does not show. Kinds not asked for are counted in a note. Where
nothing can be counted (the administration API refuses a key without the Manage right), the purge
is not confirmed complete, so the report is not ok: an error says what is left was not counted and
why (sessions Service Bus does not list may still hold messages), naming Manage and
``session_ids``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable
from contextlib import aclosing
from typing import Any

from ...connections.links import opened, receiver_for
from ...connections.live import LiveConnection
from ...connections.loop import stop_if_cancelled
from ...connections.registry import ConnectionLike, live
from ...connections.syncforms import sync_form
from ...entities import EntityPath
from ...errors import InvalidInputError, SbError, SessionLockedError
from ...operations.bounds import TimeWindow
from ...operations.messages import message_id
from ...operations.receive import fetch_batch
from ...operations.scan import STATES, SessionHold, anything_there, ascan, message_state
from ...operations.sessions import each_session, hold_session, list_session_ids
from ...operations.window import When, enqueued_window
from ...outcome import Outcome, Report
from ...renames import renamed
from ...sdk.api import ServiceBusError, ServiceBusReceiveMode
from ...sdk.failures import from_sdk, requires_sessions
from ...sdk.receiver import drain_credit, forget_deliveries, settle_by_tokens
from ...tracing import operation
from ..leftovers import count_what_sessions_left, locked_until, what_purge_left
from .on_server import delete_on_server
from .window import BY_SEQUENCE, cancel_scheduled, delete_deferred, purge_window

log = logging.getLogger("sbnotebook.core.incidents.purge.api")

PURGE_BATCH = 500
PARALLEL_RECEIVERS = 4


def _removed(m: Any) -> Outcome:
    return Outcome(message_id(m), int(m.sequence_number or 0), "purged")


async def _purge(
    conn: LiveConnection,
    path: EntityPath,
    *,
    include_active: bool,
    include_deferred: bool,
    include_scheduled: bool,
    session_ids: list[str] | None,
    progress: Callable[[Report], None] | None,
    window: TimeWindow | None = None,
) -> Report:
    """Batch delete on the server (or, where refused, receive-and-delete with several receivers at
    once), then deferred messages by sequence number, then cancel scheduled ones (queues and topics
    only). A session-enabled entity: its sessions are listed, the server deletes what it can, then
    each listed session is emptied in turn."""

    started = time.perf_counter()
    report = Report("purge", str(path))
    asked = [s for s, on in zip(STATES, (include_active, include_deferred, include_scheduled), strict=True) if on]

    def tick() -> None:
        if progress is not None:
            progress(report)

    try:
        # Nothing there (a peek sees every message) saves the drain below its wait for messages that
        # never come (about 2 s on an empty entity, one round trip here).
        empty = not await anything_there(conn, path)
    except SbError as exc:
        if not requires_sessions(exc):
            raise
        if window is not None:
            raise InvalidInputError(
                f"{path} requires sessions: a purge with a time window peeks the entity, which Service Bus refuses"
                " without a session. Purge its sessions whole (session_ids), or its dead-letter queue by time."
            ) from None
        log.info("%s requires sessions: purging it session by session", path)
        since = dt.datetime.now(dt.UTC)
        ids = session_ids if session_ids is not None else await list_session_ids(conn, path)
        if include_active and session_ids is None:
            # Listed first: a session the server leaves holding only deferred messages is not listed.
            await delete_on_server(conn, path, report, tick)
        held, failed = await _purge_sessions(
            conn, path, ids, report, tick, include_active, include_deferred, include_scheduled
        )
        if session_ids is None:
            await count_what_sessions_left(
                conn, path, report, include_active, include_deferred, include_scheduled, held, failed
            )
        else:  # named sessions: each is peeked again (through its lock), message by message
            await _scan_named_sessions(conn, path, session_ids, report, asked, since, failed)
        report.elapsed = time.perf_counter() - started
        return report
    if session_ids is not None:
        raise InvalidInputError(f"{path} does not require sessions: purge it without session_ids.")
    if empty:
        report.elapsed = time.perf_counter() - started
        return report
    if window is not None:
        await purge_window(conn, path, window, report, tick, asked)
        report.elapsed = time.perf_counter() - started
        return report
    since = dt.datetime.now(dt.UTC)
    on_server = include_active and await delete_on_server(conn, path, report, tick)
    client = conn.sdk_client()
    if include_active and not on_server:
        await _drain_in_parallel(client, path, report, tick)
    if include_deferred or include_scheduled or on_server:
        await _purge_by_number(
            conn, path, report, tick, on_server=on_server, deferred=include_deferred, scheduled=include_scheduled
        )
    await what_purge_left(conn, path, report, asked=asked, since=since)
    report.elapsed = time.perf_counter() - started
    return report


async def _drain(client: Any, path: EntityPath, report: Report, tick: Callable[[], None]) -> None:
    """Receive-and-delete on one link until the entity is empty; what arrives late is removed too."""
    rcv = receiver_for(client, path, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, prefetch_count=PURGE_BATCH)
    async with opened(rcv):
        while batch := await rcv.receive_messages(max_message_count=PURGE_BATCH, max_wait_time=1):
            report.extend(_removed(m) for m in batch)
            forget_deliveries(rcv)  # pre-settled: the link would keep every tag to the end
            tick()
            stop_if_cancelled()  # after the batch is counted: those messages are gone
        # The prefetch credit is still out: what the broker sent meanwhile is removed too.
        late: list[Any] = []
        try:
            confirmed = await drain_credit(rcv, late)
        finally:
            report.extend(_removed(m) for m in late)  # removed, even if the connection then fails
        if not confirmed:
            report.note("the broker did not confirm the last receive: messages removed at the end may be uncounted")


async def _drain_in_parallel(client: Any, path: EntityPath, report: Report, tick: Callable[[], None]) -> None:
    await asyncio.gather(*(_drain(client, path, report, tick) for _ in range(PARALLEL_RECEIVERS)))


async def _purge_by_number(
    conn: LiveConnection,
    path: EntityPath,
    report: Report,
    tick: Callable[[], None],
    *,
    on_server: bool,
    deferred: bool,
    scheduled: bool,
) -> None:
    """After the bulk removal: what a scan still finds. Active messages left (locked while the
    server deleted, or new) are drained; deferred ones received by number; scheduled ones cancelled."""
    client = conn.sdk_client()
    found: dict[str, list[int]] = {state: [] for state in ("deferred", "scheduled")}
    found_active = locked = 0
    wanted = STATES if on_server else ("deferred", "scheduled")
    now = dt.datetime.now(dt.UTC)
    async for page in ascan(path, states=wanted, connection=conn):
        for m in page:
            state = message_state(m)
            if state == "active":
                found_active += 1
                locked += locked_until(m, now) is not None
            else:
                found[state].append(int(m.sequence_number))
    if found_active > locked:  # locked ones cannot be received: the final scan reports them
        before = report.count("purged")
        await _drain_in_parallel(client, path, report, tick)
        if report.count("purged") > before:
            _note_slow_path(report, f"{report.count('purged') - before} active message(s) left by batch delete")
    if on_server and ((deferred and found["deferred"]) or (scheduled and found["scheduled"])):
        _note_slow_path(report, "deferred and scheduled messages are not eligible for batch delete")
    if deferred and found["deferred"]:
        await delete_deferred(client, path, found["deferred"], report, tick)
    if scheduled:
        await cancel_scheduled(conn, path, found["scheduled"], report, tick)


async def _scan_named_sessions(
    conn: LiveConnection,
    path: EntityPath,
    ids: list[str],
    report: Report,
    asked: list[str],
    since: dt.datetime,
    failed: dict[str, str],
) -> None:
    """What the named sessions still hold, each peeked through its lock. A session another receiver
    holds cannot be read, so its messages cannot be counted: an error of the report says so (``ok``
    turns False) and no message outcome is made up for it. What a session whose purge failed
    (``failed``) still holds is left with that failure as its reason."""

    async def one(session_id: str) -> None:
        try:
            await what_purge_left(
                conn, path, report, asked=asked, since=since, session_id=session_id, unexplained=failed.get(session_id)
            )
        except SessionLockedError:
            report.error(
                f"session {session_id!r} is held by another receiver: not purged, and what it holds not counted"
                " (a held session cannot be read; purge again once it lets the session go)"
            )

    await each_session(ids, one)


def _note_slow_path(report: Report, why: str) -> None:
    text = f"{why}: received or removed by sequence number (slower)"
    if text not in report.notes:
        log.info("purge of %s: %s", report.entity, text)
        report.note(text)


async def _purge_sessions(
    conn: LiveConnection,
    path: EntityPath,
    session_ids: list[str],
    report: Report,
    tick: Callable[[], None],
    include_active: bool,
    include_deferred: bool,
    include_scheduled: bool,
) -> tuple[list[str], dict[str, str]]:
    """Session by session (``session_ids``, several at a time: ``each_session``), each on one
    peek-lock receiver that holds it: scan what the session holds, receive its active messages and
    fetch its deferred ones, complete what was received (a message delivered and not returned stays,
    never removed unreported), and cancel its scheduled ones. Returns the sessions another receiver
    holds: they are not purged, and their messages are accounted for at the end as left (one outcome
    per message the broker still holds), not as one made-up failed message per session. Also
    returns the sessions that failed otherwise (lock lost, link detached, timeout, ...), each with
    why: the same holds for them (a session is no message); the why is the reason of what they
    left. The other sessions go on."""
    held: list[str] = []
    failed: dict[str, str] = {}

    async def one(session_id: str) -> None:
        async def work(rcv: Any) -> list[int]:
            return await _purge_session(SessionHold(rcv), conn, path, report, tick, include_active, include_deferred)

        try:
            scheduled = await hold_session(conn, path, session_id, work)
            if include_scheduled:
                await cancel_scheduled(conn, path, scheduled, report, tick)
        except (SbError, ServiceBusError) as exc:  # reported per session, with the reason; the purge goes on
            error = exc if isinstance(exc, SbError) else from_sdk(exc, entity=str(path))
            if isinstance(error, SessionLockedError):
                log.info("purge of %s: session %r is held by another receiver: left as it is", path, session_id)
                held.append(session_id)
                return
            why = f"session {session_id!r} not purged (or not all of it): {error}"
            log.info("purge of %s: %s", path, why)
            failed[session_id] = why

    await each_session(session_ids, one)
    return sorted(held), dict(sorted(failed.items()))


async def _purge_session(
    hold: SessionHold,
    conn: LiveConnection,
    path: EntityPath,
    report: Report,
    tick: Callable[[], None],
    include_active: bool,
    include_deferred: bool,
) -> list[int]:
    """Empty the session ``hold`` holds; returns the sequence numbers of its scheduled messages."""
    found: dict[str, list[int]] = {state: [] for state in STATES}
    async with aclosing(ascan(path, held=hold, connection=conn)) as pages:
        async for page in pages:
            for m in page:
                found[message_state(m)].append(int(m.sequence_number))
    left = len(found["active"]) if include_active else 0
    while left > 0:
        stop_if_cancelled()
        got = await fetch_batch(await hold.renewed(), min(left, PURGE_BATCH), 1.0)
        if not got:
            break  # fewer than the scan saw: expired or dead-lettered meanwhile
        await settle_by_tokens(hold.receiver, "complete", got)
        report.extend(_removed(m) for m in got)
        left -= len(got)
        tick()
    deferred = found["deferred"] if include_deferred else []
    for k in range(0, len(deferred), BY_SEQUENCE):
        got = list(await (await hold.renewed()).receive_deferred_messages(deferred[k : k + BY_SEQUENCE]))
        await settle_by_tokens(hold.receiver, "complete", got)
        report.extend(_removed(m) for m in got)
        tick()
    return found["scheduled"]


def _session_ids(given: Iterable[str] | None) -> list[str] | None:
    if given is None:
        return None
    if isinstance(given, str):
        given = [given]
    ids = list(dict.fromkeys(given))
    if not ids or not all(isinstance(i, str) and i for i in ids):
        raise InvalidInputError(f"session_ids must be one or more non-empty session ids, not {given!r}.")
    return ids


# The kinds a purge removes are named as %sb_purge's flags name them (--active, --deferred, --scheduled).
PURGE_RENAMED = {"include_active": "active", "include_deferred": "deferred", "include_scheduled": "scheduled"}


@renamed(**PURGE_RENAMED)
async def apurge(
    entity: str | EntityPath,
    *,
    active: bool = True,
    deferred: bool = True,
    scheduled: bool = True,
    session_ids: Iterable[str] | None = None,
    progress: Callable[[Report], None] | None = None,
    enqueued_after: When | None = None,
    enqueued_before: When | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Remove every message from an entity (or its DLQ). One outcome per removed message.
    ``active=False`` leaves active messages (purge only deferred and/or scheduled ones), as
    ``deferred=False`` and ``scheduled=False`` leave those.
    ``session_ids``: on a session-enabled entity, purge these sessions only (default: every session
    Service Bus lists, which leaves out sessions holding nothing but deferred or scheduled messages).
    ``enqueued_after`` / ``enqueued_before`` (a datetime, ISO 8601 or an age such as ``2h``): only
    messages enqueued within that window (purge/window.py says which path each kind takes)."""
    path = EntityPath.parse(entity)
    window = enqueued_window(enqueued_after, enqueued_before)
    if window is not None and session_ids is not None:
        raise InvalidInputError("A purge of named sessions takes them whole: give session_ids or a time window.")
    conn = live(connection)
    with operation("purge", conn, path) as span:
        report = await conn.call_on(
            path,
            _purge(
                conn,
                path,
                include_active=active,
                include_deferred=deferred,
                include_scheduled=scheduled,
                session_ids=_session_ids(session_ids),
                progress=progress,
                window=window,
            ),
        )
        span.report(report)
    return report


purge = sync_form(apurge)
