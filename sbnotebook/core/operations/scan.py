"""The one way to page through an entity: peeks (no locks, no delivery counts), in sequence order.

Everything that reads an entity without settling it goes through :func:`scan`: ``peek``, searches
(``--where``), purge and resubmit (to find what to act on), export, the Spark reader and the
message browser. ``PAGE_SIZE`` is the one page-size setting.

How it stays fast far from the namespace: one peek returns at most ``PAGE_SIZE`` messages, so a
large entity takes many round trips. After the first page, the scan splits the sequence numbers
ahead into windows of about one page each and peeks up to ``max_in_flight`` windows at once, each
on its own link, then hands the pages back in order. A window that finds nothing in its range but
a message further on moves the next windows past the gap; a window that finds nothing at all ends
the scan. At most ``max_in_flight`` windows are held at once, so memory stays bounded. An entity
scanned before on the connection, and found to run past its first page, is not peeked alone first:
its windows go at once, sized from where and how densely the last scan found its first page
(``LiveConnection.firsts``), the first of them from where this scan starts, so that nothing new below
the remembered start is missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import math
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..connections.links import receiver_for
from ..connections.live import LiveConnection
from ..connections.loop import stop_if_cancelled
from ..connections.registry import ConnectionLike, live
from ..connections.syncforms import taking_arguments_of
from ..defaults import check_max_in_flight, check_whole_number
from ..entities import EntityPath
from ..errors import InvalidInputError, SbError
from ..renames import renamed
from ..sdk.api import SessionLockLostError
from ..sdk.failures import from_sdk, requires_sessions
from ..sdk.opening import close_now, open_without_sleeps
from ..views.records import to_record

PAGE_SIZE = 250
"""Messages asked for per peek call: the most the SDK returns per peek call in practice."""
DEFAULT_MAX_IN_FLIGHT = 16  # windows in flight: at 80 ms, 20,000 messages take 0.91 s warm (8: 1.25 s, 24: 0.85 s)
STATES = ("active", "deferred", "scheduled")

# Old keywords (docs/names.md), kept for one release: each says once what replaced it.
SCAN_RENAMED = {
    "limit": "max_messages",
    "start": "from_sequence_number",
    "stop": "before_sequence_number",
    "concurrency": "max_in_flight",
}

log = logging.getLogger(__name__)


@dataclass
class _Window:
    first: int  # inclusive
    stop: int  # exclusive
    messages: list[Any] = field(default_factory=list)
    next_present: int | None = None  # the first sequence number found at or after `stop`
    empty_beyond: bool = False  # nothing at all at or after the window's last peek


def _left(until: dt.datetime | None) -> float:
    """Seconds until ``until`` (a lock's expiry, UTC), 0 when unknown."""
    return 0.0 if until is None else (until - dt.datetime.now(dt.UTC)).total_seconds()


def message_state(message: Any) -> str:
    """A peeked message's state: active, deferred or scheduled."""
    state = getattr(message, "state", None)
    return state.name.lower() if state is not None else "active"


def _check(start: int, stop: int | None, max_messages: int | None, max_in_flight: int, page_size: int) -> None:
    check_whole_number(start, "from_sequence_number", minimum=0)
    if stop is not None and (not isinstance(stop, int) or stop < start):
        raise InvalidInputError(f"before_sequence_number must be at least from_sequence_number, not {stop!r}.")
    if max_messages is not None:
        check_whole_number(max_messages, "max_messages")
    check_max_in_flight(max_in_flight)
    if not isinstance(page_size, int) or not 1 <= page_size <= PAGE_SIZE:
        raise InvalidInputError(f"page_size must be between 1 and {PAGE_SIZE}, not {page_size!r}.")


@renamed(**SCAN_RENAMED)
async def ascan(
    entity: str | EntityPath,
    *,
    from_sequence_number: int = 1,
    before_sequence_number: int | None = None,
    max_messages: int | None = None,
    states: Iterable[str] | None = None,
    session_id: str | None = None,
    held: SessionHold | None = None,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    page_size: int = PAGE_SIZE,
    connection: ConnectionLike = None,
) -> AsyncGenerator[list[Any], None]:
    """Yield pages of peeked SDK messages with ``from_sequence_number <= sequence number <
    before_sequence_number``, in order, at most ``max_messages`` messages (after the ``states``
    filter), peeking up to ``max_in_flight`` windows at once (each one peek of up to ``page_size``).
    Runs on the live connection's loop. ``held``: peek the session that receiver holds (it stays
    open) instead of accepting one."""
    path = EntityPath.parse(entity)
    start, stop = from_sequence_number, before_sequence_number
    _check(start, stop, max_messages, max_in_flight, page_size)
    wanted = {s.lower() for s in states} if states is not None else None
    if wanted is not None and not wanted <= set(STATES):
        raise InvalidInputError(f"states must be among {', '.join(STATES)}, not {sorted(wanted)}.")
    one_link = session_id is not None or held is not None  # a session is peeked through its one receiver
    pager = _Pager(live(connection), path, session_id, page_size, held)
    async with contextlib.aclosing(
        _paged(pager, max(start, 1), stop, 1 if one_link else max_in_flight, max_messages, wanted)
    ) as pages:
        async for page in pages:
            yield page


async def ascan_range(
    entity: str | EntityPath, first: int, last: int, connection: ConnectionLike = None, density: float = 1.0
) -> AsyncGenerator[list[Any], None]:
    """Pages of the SDK messages numbered ``first..last``, a range known to be there (a time window's,
    found by a search): ``ascan``'s, but its windows peeked all at once from the first one, not after
    a first page peeked alone (which only tells how densely the numbers run and whether the entity
    ends there): far from the namespace, a round trip less. ``density``: the share of the numbers
    that hold a message, known beforehand (the message count over the entity's span of numbers: a
    dead-letter queue's are sparse), so that each window holds about a page."""
    pager = _Pager(live(connection), EntityPath.parse(entity), None, PAGE_SIZE, None)
    async with contextlib.aclosing(
        _paged(pager, max(first, 1), last + 1, DEFAULT_MAX_IN_FLIGHT, None, None, density)
    ) as pages:
        async for page in pages:
            yield page


async def _paged(
    pager: _Pager,
    start: int,
    stop: int | None,
    max_in_flight: int,
    max_messages: int | None,
    wanted: set[str] | None,
    density: float | None = None,
) -> AsyncGenerator[list[Any], None]:
    """The pager's pages, in the ``states`` wanted, at most ``max_messages``; the SDK's errors as the
    kit's; the pager closed at the end."""
    remaining = max_messages
    try:
        async for page in pager.pages(start, stop, max_in_flight, max_messages, density):
            if wanted is not None:
                page = [m for m in page if message_state(m) in wanted]
            if remaining is not None:
                page = page[:remaining]
                remaining -= len(page)
            if page:
                yield page
            if remaining == 0:
                return
    except (SbError, asyncio.CancelledError, GeneratorExit):
        raise
    except Exception as exc:
        raise from_sdk(exc, entity=str(pager.path)) from None
    finally:
        await pager.close()


class SessionHold:
    """A receiver that holds one session, its lock renewed once less than half its duration is left
    (a session's messages can be peeked, received and settled only through its lock)."""

    def __init__(self, receiver: Any) -> None:
        self.receiver = receiver
        self._span = _left(receiver.session.locked_until_utc)  # seconds the lock lasted when accepted

    async def renewed(self) -> Any:
        if _left(self.receiver.session.locked_until_utc) < self._span / 2:
            await self.receiver.session.renew_lock()
        return self.receiver


class _Pager:
    """Peeks on pooled links, or on one session receiver: its own, or one the caller holds."""

    def __init__(
        self, conn: LiveConnection, path: EntityPath, session_id: str | None, page_size: int, held: SessionHold | None
    ) -> None:
        self.conn, self.path, self.session_id, self.page_size = conn, path, session_id, page_size
        self._hold = held
        self._owned = held is None  # a receiver the pager opened (and closes); not the caller's

    @property
    def _pooled(self) -> bool:
        """Whether this pager peeks on the connection's pooled links (not through one session's receiver)."""
        return self.session_id is None and self._hold is None

    async def peek(self, first: int, count: int) -> list[Any]:
        if self._pooled:

            async def op(link: Any) -> list[Any]:
                return list(await link.peek_messages(max_message_count=count, sequence_number=first))

            got = await self.conn.with_link("receiver", self.path, op)
            if got and len(got) < count:  # it saw the entity's end
                self.conn.ends[self.path] = int(got[-1].sequence_number)
            return got
        try:
            rcv = await self._session()
            return list(await rcv.peek_messages(max_message_count=count, sequence_number=first))
        except SessionLockLostError:
            if not self._owned:
                raise  # the caller's hold: the caller decides
            # Peeking a session needs its lock. A slow host or a short LockDuration can lose it between
            # two pages; a peek changes nothing, so the session is accepted again and the page peeked
            # again, once.
            log.info("session %r of %s: its lock expired during a scan; accepted it again", self.session_id, self.path)
            await self.close()
            rcv = await self._session()
            return list(await rcv.peek_messages(max_message_count=count, sequence_number=first))

    async def _session(self) -> Any:
        if self._hold is None:
            rcv = receiver_for(self.conn.sdk_client(), self.path, session_id=self.session_id)
            await open_without_sleeps(rcv)
            self._hold = SessionHold(rcv)
            return rcv
        return await self._hold.renewed()

    async def close(self) -> None:
        if self._owned and self._hold is not None:
            rcv, self._hold = self._hold.receiver, None
            await close_now(rcv)  # lets the session go

    async def window(self, w: _Window) -> _Window:
        at = w.first
        while at < w.stop:
            stop_if_cancelled()
            got = await self.peek(at, self.page_size)
            if not got:
                w.empty_beyond = True
                return w
            inside = [m for m in got if int(m.sequence_number) < w.stop]
            w.messages.extend(inside)
            if len(inside) < len(got):
                w.next_present = int(got[len(inside)].sequence_number)
                return w
            at = int(got[-1].sequence_number) + 1
        return w

    def _remembered(self, start: int, stop: int | None, limit: int | None) -> tuple[int, float] | None:
        """Where the last scan from the start found this entity's first page, and how densely it was
        numbered, when this scan may peek its windows at once from it: on pooled links (a session is
        peeked through its one receiver), for more than a page, starting at or below it."""
        if not self._pooled or (limit is not None and limit <= self.page_size):
            return None
        known = self.conn.firsts.get(self.path)
        if known is None or known[0] < start or (stop is not None and known[0] >= stop):
            return None
        return known

    def _remember(self, start: int, page: list[Any], *, more: bool) -> None:
        """The first page a scan from the entity's start found: where it begins and how densely it is
        numbered, when ``more`` follows it. An entity that ended within it (or held nothing) is
        forgotten: its next scan peeks one page alone, as a first scan does, not ``max_in_flight``
        windows. A scan from further on, or of a session, is not remembered."""
        if start > 1 or not self._pooled:
            return
        if not page or not more:
            self.conn.firsts.pop(self.path, None)
            return
        low, high = int(page[0].sequence_number), int(page[-1].sequence_number)
        self.conn.firsts[self.path] = (low, len(page) / max(1, high - low + 1))

    async def pages(
        self, start: int, stop: int | None, max_in_flight: int, limit: int | None, density: float | None = None
    ) -> AsyncIterator[list[Any]]:
        """With ``density`` (a range ``start..stop`` known to be there, that share of its numbers
        holding a message): no first page alone, every window launched from ``start``, each sized to
        hold about a page (a gap only costs peeks)."""
        ranged = density is not None and stop is not None
        remembered = None if ranged else self._remembered(start, stop, limit)
        first_end: int | None = None  # the first window's end, when it is sized from a remembered start
        if ranged:
            width = max(self.page_size, math.floor(self.page_size / max(density if density is not None else 1.0, 1e-9)))
            seen, at, short = 0, start, False
        elif remembered is not None:
            low, density = remembered
            width = max(self.page_size, math.floor(self.page_size / density))
            seen, at, short, first_end = 0, start, False, low + width
        else:
            first_count = min(self.page_size, limit) if limit is not None else self.page_size
            raw = await self.peek(start, first_count)
            head = [m for m in raw if stop is None or int(m.sequence_number) < stop]
            if head:
                yield head
            if not head or len(head) < len(raw) or (limit is not None and len(head) >= limit):
                return
            low, high = int(head[0].sequence_number), int(head[-1].sequence_number)
            # Windows sized to hold about one page, from how densely the first page was numbered.
            density = len(head) / max(1, high - low + 1)
            short = len(raw) < first_count
            self._remember(start, head, more=not short and first_count == self.page_size)
            width = max(self.page_size, math.floor(self.page_size / density))
            seen, at = len(head), high + 1
        running: deque[tuple[_Window, asyncio.Task[_Window]]] = deque()

        def launch() -> None:
            nonlocal at, first_end
            if stop is not None and at >= stop:
                return
            end = at + width if first_end is None else first_end
            first_end = None
            end = end if stop is None else min(end, stop)
            w = _Window(at, end)
            running.append((w, asyncio.ensure_future(self.window(w))))
            at = end

        # A short first page is most likely the end: confirm with one window, not `max_in_flight`.
        target = 1 if short else max_in_flight
        try:
            while len(running) < target and (stop is None or at < stop):
                launch()
            while running:
                w, task = running.popleft()
                await task
                if remembered is not None and (w.messages or w.empty_beyond):
                    # The first messages found: what the next scan remembers, if the entity runs on past them.
                    self._remember(start, w.messages, more=not w.empty_beyond)
                    remembered = None
                if w.messages:
                    seen += len(w.messages)
                    yield w.messages
                if w.empty_beyond or (limit is not None and seen >= limit):
                    return
                if w.next_present is not None and w.next_present > at:
                    at = w.next_present  # skip a gap in the numbering
                if w.messages:
                    target = max_in_flight
                while len(running) < target and (stop is None or at < stop):
                    launch()
        finally:
            for _, task in running:
                task.cancel()
            await asyncio.gather(*(t for _, t in running), return_exceptions=True)


async def apeek_once(conn: LiveConnection, path: EntityPath, start: int, count: int) -> list[Any]:
    """The SDK messages of one peek of at most ``count`` (``PAGE_SIZE``) at or after ``start``, on the
    connection's pooled links: one round trip (``core.copy`` asks for as many as it has room for)."""
    return await _Pager(conn, path, None, count, None).peek(max(start, 1), count)


async def anything_there(conn: LiveConnection, path: EntityPath) -> bool:
    """Whether ``path`` holds any message: one peek of one from the first sequence number. A peek sees
    every message there is (active, locked, deferred, scheduled) and locks nothing."""
    async with contextlib.aclosing(ascan(path, max_messages=1, page_size=1, max_in_flight=1, connection=conn)) as pages:
        async for _ in pages:
            return True
    return False


def sessions_refused(path: EntityPath, exc: BaseException, what: str) -> InvalidInputError | None:
    """The one line for ``what`` (a copy, a tail: reads that lock nothing) on a session-enabled entity,
    when ``exc`` is Service Bus refusing a peek without a session; None for any other error."""
    if not requires_sessions(exc):
        return None
    return InvalidInputError(
        f"{path} is session-enabled, and {what} peeks with nothing locked: Service Bus peeks a session-enabled "
        "queue or subscription only through one session's lock, which takes that session from its consumers "
        f"while it is held (and a session a consumer holds cannot be read). Its dead-letter queue has no "
        f"sessions ({path.dead_letter}); one session is read by naming its session id."
    )


@renamed(**SCAN_RENAMED)
def scan(
    entity: str | EntityPath,
    *,
    progress: Callable[[int], None] | None = None,  # scan's own; the rest are ascan's, in its order
    from_sequence_number: int = 1,
    before_sequence_number: int | None = None,
    max_messages: int | None = None,
    states: Iterable[str] | None = None,
    session_id: str | None = None,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    page_size: int = PAGE_SIZE,
    connection: ConnectionLike = None,
) -> Generator[list[dict[str, Any]], None, None]:
    """Pages of records (the one record schema), in sequence order; see :func:`ascan`.
    ``progress(n)`` is called with the number of records so far after each page. ``close()`` the
    generator (or leave its ``for`` loop) to stop reading ahead."""
    path = EntityPath.parse(entity)
    conn = live(connection)
    pages = ascan(
        path,
        from_sequence_number=from_sequence_number,
        before_sequence_number=before_sequence_number,
        max_messages=max_messages,
        states=states,
        session_id=session_id,
        max_in_flight=max_in_flight,
        page_size=page_size,
        connection=conn,
    )
    done = 0
    for page in conn.iterate(pages):
        records = [to_record(m, str(path)) for m in page]
        done += len(records)
        if progress is not None:
            progress(done)
        yield records


def sequence_numbers(
    entity: str | EntityPath,
    *,
    states: Iterable[str] | None = None,
    session_id: str | None = None,
    progress: Callable[[int], None] | None = None,
    connection: ConnectionLike = None,
) -> list[int]:
    """The sequence numbers of every message (in ``states``; of one session, if given), read with the
    scanner: what to count, cancel or fetch by number, without building records."""
    path = EntityPath.parse(entity)
    conn = live(connection)
    out: list[int] = []
    for page in conn.iterate(ascan(path, states=states, session_id=session_id, connection=conn)):
        out.extend(int(m.sequence_number) for m in page)
        if progress is not None:
            progress(len(out))
    return out


@renamed(**SCAN_RENAMED)
def _scan_records(given: dict[str, Any]) -> list[dict[str, Any]]:
    """Every record :func:`scan` yields, as one list (mind the size of what you ask for)."""
    return [r for page in scan(**given) for r in page]


scan_records = taking_arguments_of(scan, _scan_records)


@renamed(start="from_sequence_number", count="max_messages")
def peek_numbers(
    entity: str | EntityPath, *, from_sequence_number: int = 1, max_messages: int = 1, connection: ConnectionLike = None
) -> list[int]:
    """The sequence numbers of the first ``max_messages`` (at most ``PAGE_SIZE``) messages at or
    after ``from_sequence_number``, from exactly one peek: one round trip. (:func:`scan` would spend a
    second one confirming that a short page is the end; bounds searches want the short page itself.)"""
    return [int(m.sequence_number) for m in _peek_once(entity, from_sequence_number, max_messages, connection)]


@renamed(start="from_sequence_number", count="max_messages")
def peek_page(
    entity: str | EntityPath,
    *,
    from_sequence_number: int = 1,
    max_messages: int = PAGE_SIZE,
    connection: ConnectionLike = None,
) -> list[dict[str, Any]]:
    """The first ``max_messages`` (at most ``PAGE_SIZE``) messages at or after
    ``from_sequence_number`` as records, from exactly one peek (a live tail's poll: one round trip,
    nothing locked or counted)."""
    path = EntityPath.parse(entity)
    return [to_record(m, str(path)) for m in _peek_once(path, from_sequence_number, max_messages, connection)]


def _peek_once(entity: str | EntityPath, start: int, count: int, connection: ConnectionLike) -> list[Any]:
    path = EntityPath.parse(entity)
    _check(start, None, count, 1, PAGE_SIZE)
    if count > PAGE_SIZE:
        raise InvalidInputError(f"max_messages must be at most {PAGE_SIZE}, not {count!r}.")
    conn = live(connection)

    async def one() -> list[Any]:
        pager = _Pager(conn, path, None, count, None)
        try:
            return await pager.peek(max(start, 1), count)
        except (SbError, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise from_sdk(exc, entity=str(path)) from None
        finally:
            await pager.close()

    return conn.run_on(path, one())
