"""A copy's source read ahead by peeking, never more than ``HELD`` messages in memory (``core.copy``,
core/incidents/copying.py).

A message counts against the bound from the moment a peek that may bring it is sent (its answer
needs the room: what the answer brings is in memory whatever the copy holds then) until the target
confirms its copy, so the copy moves at most ``HELD`` messages per peek round trip plus send round
trip (Little's law; docs/benchmarks.md). What else a message waits for is time it holds room and
does not move: the rest of its page being copied, the sends of the whole page confirmed before the
next page may be asked for. So the peeks are small (``PEEK``) and several go out at once, each as
soon as what is held and what is asked for leave room for its whole answer, each from the sequence
number where the one before it ends if the numbers run on without gaps; the answers are handed on
in order, less what an answer before them brought already (numbers with gaps make peeks overlap).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from ..connections.live import LiveConnection
from ..entities import EntityPath
from ..errors import SbError
from ..operations.scan import PAGE_SIZE, apeek_once, sessions_refused
from ..operations.window import Span
from ..sdk.failures import from_sdk

# Source messages a copy holds in memory at most: peeked (or asked for), not yet confirmed copied.
HELD = 2 * PAGE_SIZE
# Messages one peek asks for: a tenth of what may be held, so ten peeks' room is released as their
# sends are confirmed, batch by batch, and no answer waits for a whole page's sends. 5,000 at 80 ms:
# 1.92-1.93 s, where whole pages one at a time took 2.29-2.37 s; peeks of 25 cost 15% more CPU for
# no gain (docs/benchmarks.md).
PEEK = HELD // 10

Ahead = deque[asyncio.Future[list[Any]]]


class PeekAhead:
    """The source peeked ahead into ``pages`` (``read``), ``held`` of its messages in memory: each
    leaves it when the copy calls ``release`` (confirmed, refused or skipped); ``peak`` the most held."""

    def __init__(
        self, src: LiveConnection, src_path: EntityPath, first: int, span: Span | bool | None, wanted: int | None
    ) -> None:
        self.src, self.src_path, self.name = src, src_path, str(src_path)
        self.first = first
        self.wanted = wanted  # the copy's max_messages left: no more asked for at once (None: no limit)
        self.span = span  # a window's sequence numbers (None: nothing can be in it; False: no window)
        self.held = 0
        self.asked = 0  # room kept for the answers of the peeks on their way
        self.peak = 0
        self.room = asyncio.Event()
        # Pages peeked and not yet copied, in order; None: the source has no more; an exception: the peek failed.
        self.pages: asyncio.Queue[list[Any] | BaseException | None] = asyncio.Queue()

    def release(self, n: int = 1) -> None:
        """``n`` source messages leave memory: room for the next peeks."""
        self.held -= n
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
                while self.held + self.asked + PEEK <= HELD and (last is None or at <= last) and self._wanted():
                    at = max(at, covered + 1)
                    ahead.append(asyncio.ensure_future(self._peek(at)))
                    self.asked += PEEK
                    at += PEEK
                if not ahead and last is not None and at > last:
                    return True
                if not ahead or not ahead[0].done():
                    await self._answer_or_room(ahead[0] if ahead else None)
                    continue
                self.asked -= PEEK
                try:
                    page = ahead.popleft().result()
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
                if len(page) < PEEK:  # the end as that peek saw it: the peeks after it may have
                    self._drop(ahead)  # started past messages sent since, so from the next number again
                    at = covered + 1
        finally:
            self._drop(ahead)

    def _wanted(self) -> bool:
        """Whether the copy may want more than is held and asked for (``-n 5`` asks for one peek, not ten)."""
        return self.wanted is None or self.held + self.asked < self.wanted

    async def _peek(self, at: int) -> list[Any]:
        """One peek on the source's connection (its loop), made only when it starts: a peek
        cancelled before it started leaves no coroutine behind."""
        return await self.src.call(apeek_once(self.src, self.src_path, at, PEEK))

    async def _answer_or_room(self, peek: asyncio.Future[list[Any]] | None) -> None:
        """Until the first peek on its way (if any) answers or messages leave memory."""
        self.room.clear()
        waiting = asyncio.ensure_future(self.room.wait())
        await asyncio.wait((waiting,) if peek is None else (peek, waiting), return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()

    def _hand_on(self, inside: list[Any], scheduled_only: bool) -> None:
        span = self.span
        kept = inside if not isinstance(span, Span) else [m for m in inside if span.keeps(m, scheduled_only)]
        self.held += len(kept)
        self.peak = max(self.peak, self.held)
        if kept:
            self.pages.put_nowait(kept)

    def _drop(self, ahead: Ahead) -> None:
        """Peeks asked ahead no longer wanted: cancelled, their room given back."""
        while ahead:
            peek = ahead.popleft()
            if peek.done() and not peek.cancelled():
                peek.exception()  # read: a failure no one waits for any more is not logged as lost
            peek.cancel()
            self.asked -= PEEK
        self.room.set()
