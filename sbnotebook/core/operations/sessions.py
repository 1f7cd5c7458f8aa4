"""Sessions of a session-enabled queue or subscription: list them, read and write a session's state.

What the protocol gives, and how it is used:

- ``get-message-sessions`` (the SDK's public ``list_queue_sessions`` / ``list_subscription_sessions``)
  lists the ids of sessions with messages or stored state, or those whose state was updated after a
  time. It gives no per-session lock status, state or time.
- A session's state is read and written on a receiver that holds the session
  (``receiver.session.get_state()`` / ``set_state()``). So the details of a session come from
  accepting it for a moment (no message is received, no delivery count changes) and closing the
  receiver, which gives the session back. A session another receiver holds cannot be accepted:
  that is how "locked" is known; its state and messages are then unknown (None).
- The message count is a peek of at most ``max_counted`` messages on that receiver (``more`` says
  the session holds more), and ``last_enqueued`` the newest enqueued time among them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..connections.links import quietly, receiver_for
from ..connections.live import LiveConnection
from ..connections.loop import stop_if_cancelled
from ..connections.registry import ConnectionLike, live
from ..defaults import MAX_SESSIONS
from ..entities import EntityPath, not_dead_letter
from ..errors import InvalidInputError, SessionLockedError
from ..renames import renamed
from ..sdk.api import SessionCannotBeLockedError
from ..sdk.failures import from_sdk
from ..sdk.management import session_id_page
from ..sdk.opening import close_now, open_without_sleeps
from ..times import When, parse_time
from ..views.records import utf8
from .scan import PAGE_SIZE, ascan, message_state

T = TypeVar("T")
SESSIONS_AT_ONCE = 8  # sessions held at once (listing details, purging, counting for a purge)


@dataclass(frozen=True)
class SessionInfo:
    """One session as :func:`list_sessions` found it."""

    session_id: str
    locked: bool  # another receiver holds it (so state and messages are unknown)
    state: bytes | None = None
    messages: int | None = None  # counted by peeking, at most the count limit
    more: bool = False  # the session holds more messages than were counted
    last_enqueued: dt.datetime | None = None  # newest enqueued time among the counted messages

    @property
    def state_text(self) -> str | None:
        """The state as text (UTF-8), or a note for binary state."""
        return state_text(self.state)


def state_text(state: bytes | None) -> str | None:
    """Session state as text (UTF-8), or a note for binary state; None for no state."""
    if state is None:
        return None
    text = utf8(state)
    return text if text is not None else f"<{len(state)} binary bytes>"


def pretty_state(state: bytes | None) -> str:
    """Session state for people: JSON indented, text as it is, "(no state)" for none."""
    text = state_text(state)
    if text is None:
        return "(no state)"
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _session_path(entity: str | EntityPath) -> EntityPath:
    return not_dead_letter(entity, "sessions are listed on {parent}.")


async def list_session_ids(
    conn: LiveConnection, path: EntityPath, updated_after: dt.datetime | None = None, limit: int = 1_000_000
) -> list[str]:
    """The ids of the sessions with messages or state (or whose state was set after a time), asked
    on a management handler the live connection keeps open (one round trip a page of 100)."""

    async def pages(browser: Any) -> list[str]:
        ids: dict[str, None] = {}  # in order, once each: paging by skip over a snapshot may repeat an id
        more, skip = True, 0
        while more and len(ids) < limit:
            stop_if_cancelled()
            page, more = await session_id_page(browser, updated_after, skip)
            skip += len(page)
            ids.update(dict.fromkeys(page))
        return list(ids)[:limit]

    return list(await conn.with_link("sessions", path, pages))


async def hold_session(
    conn: LiveConnection, path: EntityPath, session_id: str, work: Callable[[Any], Awaitable[T]]
) -> T:
    """Accept the session on a receiver of its own, run ``work(receiver)``, and give it back."""
    rcv = receiver_for(conn.sdk_client(), path, session_id=session_id, prefetch_count=0)
    try:
        await open_without_sleeps(rcv)
    except SessionCannotBeLockedError as exc:
        await quietly(close_now(rcv))
        raise from_sdk(exc, entity=str(path)) from None
    except BaseException:
        await quietly(close_now(rcv))
        raise
    try:
        return await work(rcv)
    finally:
        await quietly(close_now(rcv))  # gives the session back


async def _details(conn: LiveConnection, path: EntityPath, session_id: str, max_counted: int) -> SessionInfo:
    async def look(rcv: Any) -> SessionInfo:
        state = await rcv.session.get_state()
        peeked = await rcv.peek_messages(max_message_count=max_counted, sequence_number=1) if max_counted else []
        times = [m.enqueued_time_utc for m in peeked if m.enqueued_time_utc is not None]
        return SessionInfo(
            session_id,
            locked=False,
            state=bytes(state) if state else None,
            messages=len(peeked),
            more=len(peeked) >= max_counted > 0,
            last_enqueued=max(times) if times else None,
        )

    try:
        return await hold_session(conn, path, session_id, look)
    except SessionLockedError:
        return SessionInfo(session_id, locked=True)


async def _list_sessions(
    conn: LiveConnection,
    path: EntityPath,
    updated_after: dt.datetime | None,
    limit: int,
    details: bool,
    max_counted: int,
) -> list[SessionInfo]:
    ids = await list_session_ids(conn, path, updated_after, limit)
    if not details:
        return [SessionInfo(sid, locked=False) for sid in ids]
    return await each_session(ids, lambda sid: _details(conn, path, sid, max_counted))


async def each_session(session_ids: Sequence[str], work: Callable[[str], Awaitable[T]]) -> list[T]:
    """``work(session_id)`` for each session, ``SESSIONS_AT_ONCE`` at a time: accepting a session
    costs the SDK's open (about 0.5 s) whatever it holds. If one raises, the others still running
    are cancelled and the error goes on."""
    gate = asyncio.Semaphore(SESSIONS_AT_ONCE)

    async def one(session_id: str) -> T:
        async with gate:
            return await work(session_id)

    tasks = [asyncio.ensure_future(one(sid)) for sid in session_ids]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@renamed(limit="max_sessions", count_limit="max_counted")
def list_sessions(
    entity: str | EntityPath,
    *,
    updated_after: When | None = None,
    max_sessions: int = MAX_SESSIONS,
    details: bool = True,
    max_counted: int = PAGE_SIZE,
    connection: ConnectionLike = None,
) -> list[SessionInfo]:
    """The sessions of a session-enabled queue or subscription that have messages or state (or,
    with ``updated_after``, whose state was set after that time: a datetime, ISO 8601 or an age such
    as ``2h``, ``parse_time``), at most ``max_sessions`` of them.

    With ``details`` each session is accepted for a moment to read its state and count its
    messages (at most ``max_counted`` of each session's are counted, by peeking; 0 counts none); a
    session another receiver holds shows as ``locked``. Without, only the ids (``locked`` False:
    not looked at)."""
    if max_sessions < 1 or max_counted < 0:
        raise InvalidInputError("max_sessions must be 1 or more and max_counted 0 or more.")
    after = None if updated_after is None else parse_time(updated_after, name="updated_after")
    path = _session_path(entity)
    conn = live(connection)
    return list(conn.run_on(path, _list_sessions(conn, path, after, max_sessions, details, max_counted)))


def get_session_state(entity: str | EntityPath, session_id: str, *, connection: ConnectionLike = None) -> bytes | None:
    """A session's state (None when it has none). Raises :class:`SessionLockedError` when another
    receiver holds the session."""
    path = _session_path(entity)
    conn = live(connection)

    async def read(rcv: Any) -> bytes | None:
        state = await rcv.session.get_state()
        return bytes(state) if state else None

    result: bytes | None = conn.run_on(path, hold_session(conn, path, session_id, read))
    return result


def set_session_state(
    entity: str | EntityPath, session_id: str, state: bytes | str | None, *, connection: ConnectionLike = None
) -> bytes | None:
    """Replace a session's state (None or empty clears it); returns the state it had before.
    Raises :class:`SessionLockedError` when another receiver holds the session."""
    path = _session_path(entity)
    conn = live(connection)
    new = state.encode("utf-8") if isinstance(state, str) else state

    async def write(rcv: Any) -> bytes | None:
        old = await rcv.session.get_state()
        await rcv.session.set_state(new or None)
        return bytes(old) if old else None

    result: bytes | None = conn.run_on(path, hold_session(conn, path, session_id, write))
    return result


@dataclass(frozen=True)
class SessionStates:
    """How many messages each session holds, by state (``active``, ``deferred``, ``scheduled``), and
    the sessions another receiver holds (not looked at)."""

    found: dict[str, dict[str, int]]
    held: list[str]

    def total(self, state: str) -> int:
        return sum(counted.get(state, 0) for counted in self.found.values())


def count_session_states(
    entity: str | EntityPath, session_ids: Sequence[str], *, connection: ConnectionLike = None
) -> SessionStates:
    """Count each named session's messages by state, scanned through the session's lock (nothing is
    received or counted as a delivery), ``SESSIONS_AT_ONCE`` sessions at a time: Service Bus counts
    per entity, not per session. A session another receiver holds is listed in ``held``."""
    path = _session_path(entity)
    conn = live(connection)

    async def one(session_id: str) -> dict[str, int] | None:
        counted: dict[str, int] = {}
        try:
            async for page in ascan(path, session_id=session_id, connection=conn):
                for message in page:
                    state = message_state(message)
                    counted[state] = counted.get(state, 0) + 1
        except SessionLockedError:
            return None
        return counted

    async def every() -> list[dict[str, int] | None]:
        return await each_session(list(session_ids), one)

    results = conn.run(every())
    found = {sid: got for sid, got in zip(session_ids, results, strict=True) if got is not None}
    held = [sid for sid, got in zip(session_ids, results, strict=True) if got is None]
    return SessionStates(found, held)
