"""A copy's source read ahead by peeking, never more than ``max_held_bytes`` of messages in memory
(``core.copy``, core/incidents/copy/api.py; the default ``defaults.MAX_HELD_BYTES``).

A message counts against the bound by its encoded size (the bytes the peek brought it in) from the
moment a peek that may bring it is sent (its answer needs the room: what the answer brings is in
memory whatever the copy holds then) until the target confirms its copy, so the copy moves at most
``max_held_bytes`` per peek round trip plus send round trip (Little's law; docs/benchmarks.md). Room
for a peek on its way is its count times the largest message seen so far: until one answer came,
one peek of ``FIRST_PEEK`` goes out alone, and a message larger than any before it can take the
copy over the bound by its own excess (the service's message size limit bounds that). A peek asks
for at most ``PAGE_SIZE`` messages and a quarter of the bound, and up to ``PEEKS_AHEAD`` go out at
once, each as soon as what is held and what is asked for leave room for its whole answer, each
from the sequence number where the one before it ends if the numbers run on without gaps; the
answers are handed on in order, less what an answer before them brought already (numbers with gaps
make peeks overlap).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from ...connections.live import LiveConnection
from ...entities import EntityPath
from ...errors import SbError
from ...operations.scan import DEFAULT_MAX_IN_FLIGHT, PAGE_SIZE, apeek_once, sessions_refused
from ...operations.window import Span
from ...sdk.encoded import encoded
from ...sdk.failures import from_sdk

FIRST_PEEK = 10  # messages the first peek asks for, alone: no size is known yet
PEEKS_AHEAD = DEFAULT_MAX_IN_FLIGHT  # peeks on their way at most (each on a link of its own), as a scan's windows


def held_size(message: Any) -> int:
    """What a peeked message counts against the bound: the bytes it was decoded from."""
    raw = encoded(message)
    return len(raw) if raw is not None else len(str(message))


Ahead = deque[tuple[asyncio.Future[list[Any]], int, int]]  # peeks on their way: each with its count and room


class PeekAhead:
    """The source peeked ahead into ``pages`` (``read``), ``held`` bytes of its messages (``count`` of
    them) in memory: each leaves it when the copy calls ``release`` with its ``held_size`` (confirmed,
    refused or skipped); ``peak`` and ``peak_count`` the most held."""

    def __init__(
        self,
        src: LiveConnection,
        src_path: EntityPath,
        first: int,
        span: Span | bool | None,
        wanted: int | None,
        max_held_bytes: int,
    ) -> None:
        self.src, self.src_path, self.name = src, src_path, str(src_path)
        self.first = first
        self.wanted = wanted  # the copy's max_messages left: no more asked for at once (None: no limit)
        self.span = span  # a window's sequence numbers (None: nothing can be in it; False: no window)
        self.bound = max_held_bytes
        self.held = self.count = 0
        self.asked = 0  # bytes of room kept for the answers of the peeks on their way
        self.asked_count = 0  # messages those peeks ask for
        self.largest = 0  # the largest message seen: what a message asked for may take
        self.peak = self.peak_count = 0
        self.room = asyncio.Event()
        # Pages peeked and not yet copied, in order; None: the source has no more; an exception: the peek failed.
        self.pages: asyncio.Queue[list[Any] | BaseException | None] = asyncio.Queue()

    def release(self, size: int, n: int = 1) -> None:
        """``n`` source messages of ``size`` bytes in all leave memory: room for the next peeks."""
        self.held -= size
        self.count -= n
        self.room.set()

    async def read(self) -> None:
        """Peek from ``first`` to the end (with a window, only its numbers), a failure anywhere
        said on ``pages``: the copy waits there, so a reader that ended without a word would leave it
        waiting for ever."""
        try:
            if self.span is False:
                parts: list[tuple[int, int | None, bool]] = [(self.first, None, False)]
            else:
                found = self.span.parts() if isinstance(self.span, Span) else []
                parts = [(max(a, self.first), b, s) for a, b, s in found if max(a, self.first) <= b]
            for first, last, scheduled_only in parts:
                if not await self.part(first, last, scheduled_only):
                    return
            self.pages.put_nowait(None)
        except Exception as exc:
            self.pages.put_nowait(exc)

    async def part(self, at: int, last: int | None, scheduled_only: bool) -> bool:
        """Sequence numbers ``at..last`` (None: to the end); False when a peek failed (said on
        ``pages``). Every message up to ``covered`` was handed on: a peek's answer is complete from
        its start, so a full answer covers at least up to where the next peek starts."""
        ahead: Ahead = deque()
        covered = at - 1
        try:
            while True:
                while (last is None or at <= last) and self._wanted() and (count := self._next_count(ahead)):
                    at = max(at, covered + 1)
                    ahead.append((asyncio.ensure_future(self._peek(at, count)), count, count * self.largest))
                    self.asked += count * self.largest
                    self.asked_count += count
                    at += count
                if not ahead and last is not None and at > last:
                    return True
                if not ahead or not ahead[0][0].done():
                    await self._answer_or_room(ahead[0][0] if ahead else None)
                    continue
                peek, count, room = ahead.popleft()
                self._unask(count, room)
                try:
                    page = peek.result()
                except Exception as exc:
                    error = exc if isinstance(exc, SbError) else from_sdk(exc, entity=self.name)
                    self.pages.put_nowait(sessions_refused(self.src_path, error, "a copy") or error)
                    return False
                fresh = [m for m in page if int(m.sequence_number) > covered]
                inside = fresh if last is None else [m for m in fresh if int(m.sequence_number) <= last]
                self._hand_on(inside, scheduled_only)
                if not page or len(inside) < len(fresh):
                    return True  # nothing at or after this peek's start, or past the part's last number
                covered = max(covered, int(page[-1].sequence_number))
                if len(page) < count:  # the end as that peek saw it: the peeks after it may have
                    self._drop(ahead)  # started past messages sent since, so from the next number again
                    at = covered + 1
        finally:
            self._drop(ahead)

    def _next_count(self, ahead: Ahead) -> int:
        """Messages the next peek may ask for now; 0: none may go out yet."""
        if len(ahead) >= PEEKS_AHEAD:
            return 0
        if not self.largest:  # no size known: one small peek alone
            return 0 if ahead else FIRST_PEEK
        count = min(PAGE_SIZE, max(1, self.bound // 4 // self.largest))
        if self.wanted is not None:  # no more than the copy may still take
            count = min(count, self.wanted - self.count - self.asked_count)
        return count if self.held + self.asked + count * self.largest <= self.bound or not (ahead or self.count) else 0

    def _unask(self, count: int, room: int) -> None:
        """A peek's answer came or it was dropped: the room kept for it is given back."""
        self.asked -= room
        self.asked_count -= count

    def _wanted(self) -> bool:
        """Whether the copy may want more than is held and asked for (``-n 5`` asks for one peek, not ten)."""
        return self.wanted is None or self.count + self.asked_count < self.wanted

    async def _peek(self, at: int, count: int) -> list[Any]:
        """One peek on the source's connection (its loop), made only when it starts: a peek
        cancelled before it started leaves no coroutine behind."""
        return await self.src.call(apeek_once(self.src, self.src_path, at, count))

    async def _answer_or_room(self, peek: asyncio.Future[list[Any]] | None) -> None:
        """Until the first peek on its way (if any) answers or messages leave memory."""
        self.room.clear()
        waiting = asyncio.ensure_future(self.room.wait())
        await asyncio.wait((waiting,) if peek is None else (peek, waiting), return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()

    def _hand_on(self, inside: list[Any], scheduled_only: bool) -> None:
        span = self.span
        kept = inside if not isinstance(span, Span) else [m for m in inside if span.keeps(m, scheduled_only)]
        self.largest = max([self.largest, *(held_size(m) for m in inside)])
        self.held += sum(held_size(m) for m in kept)
        self.count += len(kept)
        self.peak, self.peak_count = max(self.peak, self.held), max(self.peak_count, self.count)
        if kept:
            self.pages.put_nowait(kept)

    def _drop(self, ahead: Ahead) -> None:
        """Peeks asked ahead no longer wanted: cancelled, their room given back."""
        while ahead:
            peek, count, room = ahead.popleft()
            if peek.done() and not peek.cancelled():
                peek.exception()  # read: a failure no one waits for any more is not logged as lost
            peek.cancel()
            self._unask(count, room)
        self.room.set()
