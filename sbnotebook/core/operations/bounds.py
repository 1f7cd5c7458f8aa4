"""Where an entity's messages begin and end now, in sequence numbers, found by peeking.

Sequence numbers only grow (per queue or topic), so the highest number present now bounds every
message that was there: the Spark reader plans a snapshot read up to it, and a live tail
(``tail.py``) shows only what arrives after it."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..connections.live import LiveConnection
from ..connections.registry import ConnectionLike, live
from ..entities import EntityPath
from ..errors import EntityNotFoundError, SbError
from ..renames import renamed
from ..times import utc
from .counts import EntityCounts, counts
from .scan import PAGE_SIZE, apeek_once, peek_numbers

# Messages peeked at the expected end of the entity. A short window has seen the end; a full one
# (producers faster than a round trip, or holes in the numbering) falls back to a search. 32
# messages cover a producer sending 640 messages a second at 50 ms per round trip.
BOUND_WINDOW = 32
GALLOP_STEP = 1024  # the first step of the search for the end when there is no count to guess from

log = logging.getLogger(__name__)


def first_present(conn: ConnectionLike, path: EntityPath, start: int) -> int | None:
    """The lowest sequence number present from `start` on: one peek of one message."""
    got = peek_numbers(path, from_sequence_number=max(start, 1), max_messages=1, connection=conn)
    return got[0] if got else None


@renamed(conn="connection", path="entity", start="from_sequence_number")
def snapshot(connection: ConnectionLike, entity: str | EntityPath, from_sequence_number: int) -> tuple[int, int] | None:
    """The lowest and highest sequence numbers present from `from_sequence_number` on, now (None: no
    message).

    Every message enqueued after this returns has a higher number than the second one, and every
    message present before it was called has a number at most that. Costs two round trips when the
    numbering is dense: the count (administration API) and the first number (a peek) at once, then
    one peek of ``BOUND_WINDOW`` messages where the count says the end is. Without the count (no
    Manage rights) the end is searched, logged once."""
    conn, path, start = connection, EntityPath.parse(entity), from_sequence_number
    # The count and the first number are independent: ask both at once, the round trips overlap.
    with ThreadPoolExecutor(max_workers=2) as pool:
        counting = pool.submit(message_count, conn, path)
        first_found = pool.submit(first_present, conn, path, start)
        count, first = counting.result(), first_found.result()
    if first is None:
        return None
    if count is None:
        live(conn).info_once(
            "bounds-without-count",
            "no message count for %s (no Manage rights?): finding the end by peeks (more round trips)",
            path,
        )
    return first, last_present(conn, path, first, count)


def last_present(conn: ConnectionLike, path: EntityPath, first: int, count: int | None) -> int:
    """The highest sequence number present now; `first` is a number present, `count` how many
    messages the entity holds (None: unknown). With the count, one peek of ``BOUND_WINDOW`` messages
    at first + count - 1, where a densely numbered entity ends: fewer than a window back means the
    end was seen. Otherwise (the end is below the guess: holes, or messages taken meanwhile; or a
    full window: producers, or more holes) the end is searched by one-message peeks, O(log n)."""
    if count is None:
        return _search(conn, path, first, None, GALLOP_STEP)
    guess = first + max(count, 1) - 1
    window = peek_numbers(path, from_sequence_number=guess, max_messages=BOUND_WINDOW, connection=conn)
    if window and len(window) < BOUND_WINDOW:
        return window[-1]
    why = "no message at or after it" if not window else "a full window after it"
    log.info("the end of %s is not at %d (%s): searching for it", path, guess, why)
    return _search(conn, path, first, guess, 0) if not window else _search(conn, path, window[-1], None, BOUND_WINDOW)


def _search(conn: ConnectionLike, path: EntityPath, low: int, high: int | None, step: int) -> int:
    """The highest number present, with a message at `low` and none at or after `high` (None: gallop
    up from `low` by `step`, doubling, to find such a `high`), by bisection. A message that arrives
    during the search may be taken in (its number is above every one present before); none that
    arrives after it: the result is a number that was present."""
    if high is None:
        while (found := first_present(conn, path, low + step)) is not None:
            low, step = found, step * 2
        high = low + step
    while high - low > 1:
        mid = (low + high) // 2
        found = first_present(conn, path, mid)
        if found is None:
            high = mid
        else:
            low = found  # at or past `high` only if it arrived during the search: then it is the end
    return low


def counts_or_none(conn: ConnectionLike, path: EntityPath) -> EntityCounts | None:
    """The entity's counts (``counts``), or None without admin rights."""
    try:
        return counts(path, connection=conn)
    except EntityNotFoundError:
        raise
    except SbError:
        return None


def message_count(conn: ConnectionLike, path: EntityPath) -> int | None:
    """How many messages the entity (or its dead-letter queue) holds, or None without admin rights."""
    c = counts_or_none(conn, path)
    return None if c is None else held(c, path)


def held(c: EntityCounts, path: EntityPath) -> int:
    """How many of the entity's counts ``c`` are messages of ``path`` (the entity or a dead-letter queue)."""
    if path.is_dead_letter:
        return c.dead_letter if path.sub_queue == "dead_letter" else c.transfer_dead_letter
    return c.total - c.dead_letter - c.transfer_dead_letter


# ------------------------------------------------------------------ time windows

# Messages peeked per probe: the first one not scheduled is the probe. Few, as FANOUT probes are in
# flight at once and a message may be large; a run of scheduled messages costs another peek.
PROBE_PAGE = 4
FANOUT = 32  # probes in flight per round of a window's search
# Numbers an edge's search may leave undecided: the read filters every message by its time anyway,
# and peeks its pages all at once (``ascan_range``), so two pages more cost no round trip. 10^4
# messages take 1 round (32 probes leave 10^4 / 32 = 313), 10^5 2 (the second round's probes placed
# by interpolation around where the edge's time should be).
SLACK = 2 * PAGE_SIZE


def _stamp(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


@dataclass(frozen=True)
class TimeWindow:
    """Enqueued times from `after` (inclusive unless `after_open`) to `before` (exclusive unless
    `before_closed`); either end may be open (None). Times are aware (UTC)."""

    after: dt.datetime | None = None
    before: dt.datetime | None = None
    after_open: bool = False  # after < t (a pushed-down `>`), not after <= t
    before_closed: bool = False  # t <= before (a pushed-down `<=`), not t < before

    def holds(self, t: dt.datetime | None) -> bool:
        if t is None:
            return False
        if self.after is not None and (t <= self.after if self.after_open else t < self.after):
            return False
        return self.before is None or (t <= self.before if self.before_closed else t < self.before)

    def below(self, t: dt.datetime) -> bool:
        """`t` comes before the window (an earlier message is before it too)."""
        return self.after is not None and (t <= self.after if self.after_open else t < self.after)

    def beyond(self, t: dt.datetime) -> bool:
        """`t` comes after the window (a later message is after it too)."""
        return self.before is not None and (t > self.before if self.before_closed else t >= self.before)

    def narrowed(self, other: TimeWindow) -> TimeWindow:
        """Both windows at once (options and pushed-down filters)."""
        after, after_open = self.after, self.after_open
        if other.after is not None and (after is None or (other.after, other.after_open) > (after, after_open)):
            after, after_open = other.after, other.after_open
        before, before_closed = self.before, self.before_closed
        # At the same time the exclusive end (`<`, before_closed False) is the narrower one.
        if other.before is not None and (
            before is None or (other.before, other.before_closed) < (before, before_closed)
        ):
            before, before_closed = other.before, other.before_closed
        return TimeWindow(after, before, after_open, before_closed)

    def describe(self) -> str:
        """``enqueued from 2026-11-25 14:00:00.000 UTC and before 15:00:00.000 UTC`` (the half-open
        window of ``enqueued_after`` / ``enqueued_before``; a pushed-down ``>`` or ``<=`` says so)."""
        parts = []
        if self.after is not None:
            parts.append(f"{'after' if self.after_open else 'from'} {_stamp(self.after)}")
        if self.before is not None:
            parts.append(f"{'until' if self.before_closed else 'before'} {_stamp(self.before)}")
        return "enqueued " + " and ".join(parts) if parts else "any time"

    @property
    def bounded(self) -> bool:
        return self.after is not None or self.before is not None

    @property
    def empty(self) -> bool:
        """No time is in the window (pushed-down filters that contradict each other or the options)."""
        if self.after is None or self.before is None:
            return False
        if self.after == self.before:
            return self.after_open or not self.before_closed
        return self.after > self.before


@dataclass(frozen=True)
class WindowBounds:
    """What a time-bounded read peeks: sequence numbers first..last (their rows filtered by time at
    the read), and below `first`, when the entity holds scheduled messages, the range a scheduled
    message could sit in with an enqueued time inside the window (`sweep`, None: nothing to sweep)."""

    first: int
    last: int
    sweep: tuple[int, int] | None
    peeks: int
    head: tuple[Any, ...] | None = field(default=None, repr=False)  # the SDK's messages first..last, when peeked
    density: float = 1.0  # the share of the entity's numbers that hold a message (its count over its span)


async def _aprobe(conn: LiveConnection, path: EntityPath, seq: int, peeks: list[int]) -> tuple[int, Any] | None:
    """The first message at or after `seq` that was not scheduled, as (number, enqueued time): a
    scheduled message is numbered when it is scheduled but enqueued later, so its time says nothing
    about its neighbours'. None: no such message. (One that arrived after a snapshot is later than
    every message in it: as much after a window as the snapshot's end.)"""
    while True:
        page = await apeek_once(conn, path, seq, PROBE_PAGE)
        peeks[0] += 1
        for m in page:
            t = m.enqueued_time_utc
            if m.scheduled_enqueue_time_utc is None and t is not None:
                return int(m.sequence_number), utc(t)
        if len(page) < PROBE_PAGE:
            return None
        seq = int(page[-1].sequence_number) + 1


def _points(lo: int, hi: int, guess: int | None = None) -> list[int]:
    """Where one round of the search probes, in lo..hi-1: every number when few are left, else
    ``FANOUT`` evenly spread from ``lo``; with a `guess` of where the edge is, half of them evenly
    spread (whatever the guess, the next bracket is at most twice the even one's) and half packed
    around the guess, closer near it (a right guess leaves a bracket of a few numbers)."""
    if hi - lo <= FANOUT:
        return list(range(lo, hi))
    if guess is None or not lo <= guess < hi:
        step = (hi - lo) / FANOUT  # from lo (it may hold: the whole range in the window), hi excluded
        return sorted({lo + int(step * i) for i in range(FANOUT)})
    half = FANOUT // 2
    side = (FANOUT - half - 1) // 2  # each side of the guess, out to one even step from it
    step = (hi - lo) / half
    points = {lo + int(step * i) for i in range(half)} | {guess}
    for k in range(1, side + 1):
        offset = max(k, round(step * (k / side) ** 2))
        points |= {guess - offset, guess + offset}
    return sorted(p for p in points if lo <= p < hi)


def _interpolated(below: tuple[int, Any] | None, above: tuple[int, Any] | None, target: Any) -> int | None:
    """Where the enqueued time `target` should fall between two probed messages (number, time), were
    the times linear in the numbers; None when that cannot be said. Only where to probe: a wrong guess
    costs a wider bracket, never a wrong edge."""
    if below is None or above is None or target is None or not below[1] < above[1]:
        return None
    share = (target - below[1]) / (above[1] - below[1])
    return below[0] + round(min(max(share, 0.0), 1.0) * (above[0] - below[0]))


def _first_where(
    conn: ConnectionLike,
    path: EntityPath,
    low: int,
    high: int,
    holds: Any,
    peeks: list[int],
    end: Callable[[], int] | None = None,
    slack: int = 0,
    target: dt.datetime | None = None,
) -> tuple[int, tuple[int, Any] | None]:
    """The lowest s from `low` on such that the first message not scheduled at or after s is
    missing or `holds(its enqueued time)`: a predicate that, once true, stays true in sequence
    order; and that message (None: missing, or s is past `high`). A search of ``FANOUT`` probes at
    once per round (their peeks in flight together, so about log32(n) round trips, not log2(n): far
    from the namespace the rounds are the cost), jumping past each probed message that fails it.

    `high` is the highest number present, or with `end` a guess of it (from the message count): the
    search starts on the guess while `end()` finds the real one (their round trips overlap), and
    goes on past the guess only if every number up to it fails. With `slack`, it may stop with up
    to that many numbers undecided: the s returned is then the lowest of them (every number below it
    fails), and the message the highest one's probe found. `target`: the time where the predicate
    turns true (the window's edge): from the second round on, the probes are packed around where
    it falls between the messages either side of the bracket (``_interpolated``)."""
    c = live(conn)
    lo, hi = low, high + 1
    at_hi: tuple[int, Any] | None = None
    below: tuple[int, Any] | None = None  # the highest message probed that fails
    while True:
        while hi - lo > slack:
            points = _points(lo, hi, _interpolated(below, at_hi, target))

            async def probes(points: list[int] = points) -> list[tuple[int, Any] | None]:
                return list(await asyncio.gather(*(_aprobe(c, path, p, peeks) for p in points)))

            for point, got in zip(points, c.run_on(path, probes()), strict=True):
                if got is not None and not holds(got[1]):
                    lo = max(lo, got[0] + 1)  # every number up to the message found fails too
                    below = got if below is None or got[0] > below[0] else below
                else:
                    hi, at_hi = point, got  # holds here, so from here on (numbers below were probed and failed)
                    end = None  # found below the guess: the real end changes nothing
                    break
        if end is None:
            return lo, at_hi
        hi, end = max(hi, end() + 1), None  # the guess was low (holes in the numbering, arrivals)


@renamed(conn="connection", path="entity", first="from_sequence_number", last="to_sequence_number")
def time_bounds(
    connection: ConnectionLike,
    entity: EntityPath,
    from_sequence_number: int,
    to_sequence_number: int,
    window: TimeWindow,
    end: Callable[[], int] | None = None,
    slack: int = 0,
) -> WindowBounds | None:
    """The sequence numbers that hold the messages enqueued within `window`, among
    from_sequence_number..to_sequence_number (both included: the snapshot's bounds; with `end`,
    `to_sequence_number` is a guess and `end()` the real last number), found by a search of
    ``FANOUT`` probes at once: about log32(to - from) rounds of one peek each in flight per bound
    (None: no message can be in the window). ``slack``: numbers an edge may be left undecided by (the
    range then takes them in: a reader that filters by time does not mind).

    Service Bus numbers messages in order of arrival, so the enqueued times of messages that were not
    scheduled grow with their numbers. A scheduled message is numbered when it is scheduled and
    enqueued later: its time is at or after that of every message numbered before it. So every message
    above `last` of the result is after the window, every message not scheduled below `first` is
    before it; a scheduled message below `first` can still be enqueued within the window: `sweep`
    says where to look for those (only when the entity holds scheduled messages now). The read
    filters rows by time, so the edges are exact."""
    conn, path, first, last = connection, entity, from_sequence_number, to_sequence_number
    peeks = [0]
    # Whether the entity holds scheduled messages (one request to the administration API) is asked
    # while the search runs: the answer is only needed at its end.
    pool = ThreadPoolExecutor(max_workers=1) if window.after is not None else None
    scheduled = pool.submit(_may_hold_scheduled, conn, path) if pool is not None else None
    try:
        return _bounds(conn, path, (first, last, end, slack), window, peeks, scheduled)
    finally:
        if pool is not None:
            pool.shutdown(wait=False)


def _bounds(
    conn: ConnectionLike,
    path: EntityPath,
    span: tuple[int, int, Callable[[], int] | None, int],
    window: TimeWindow,
    peeks: list[int],
    scheduled: Future[bool] | None,
) -> WindowBounds | None:
    """Both edges searched at once (each from first on: the end does not need the start)."""
    first, last, end, slack = span
    with ThreadPoolExecutor(max_workers=2) as pool:
        start = stop = None
        if window.after is not None:
            start = pool.submit(
                _first_where, conn, path, first, last, lambda t: not window.below(t), peeks, end, slack, window.after
            )
        if window.before is not None:
            stop = pool.submit(_first_where, conn, path, first, last, window.beyond, peeks, end, slack, window.before)
        lo = start.result()[0] if start is not None else first
        # Scheduled messages between the end and the first message after the window stay in range:
        # the range ends before that message (the search's own probe at the end).
        after = stop.result()[1] if stop is not None else None
    last = end() if end is not None else last
    hi = min(after[0] - 1, last) if after is not None else last
    sweep = (first, lo - 1) if scheduled is not None and lo > first and scheduled.result() else None
    if lo > hi and sweep is None:
        return None
    return WindowBounds(lo, hi, sweep, peeks[0])


def _may_hold_scheduled(conn: ConnectionLike, path: EntityPath) -> bool:
    """Whether the entity (or, for a subscription, its topic) holds scheduled messages now; unknown
    (no Manage rights) counts as yes."""
    return may_hold_scheduled(counts_or_none(conn, path))


def may_hold_scheduled(c: EntityCounts | None) -> bool:
    """Whether counts ``c`` say scheduled messages are held; unknown (None: no Manage rights) is yes."""
    return c is None or bool(c.scheduled)
