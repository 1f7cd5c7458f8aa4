"""Where an entity's messages begin and end now, in sequence numbers, found by peeking.

Sequence numbers only grow (per queue or topic), so the highest number present now bounds every
message that was there: the Spark reader plans a snapshot read up to it, and a live tail
(``tail.py``) shows only what arrives after it."""

from __future__ import annotations

import datetime as dt
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..connections.registry import ConnectionLike, live
from ..entities import EntityPath
from ..errors import EntityNotFoundError, SbError
from ..renames import renamed
from .counts import counts
from .scan import peek_numbers

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


def message_count(conn: ConnectionLike, path: EntityPath) -> int | None:
    """How many messages the entity (or its dead-letter queue) holds, or None without admin rights."""
    try:
        c = counts(path, connection=conn)
    except EntityNotFoundError:
        raise
    except SbError:
        return None
    if path.is_dead_letter:
        return c.dead_letter if path.sub_queue == "dead_letter" else c.transfer_dead_letter
    return c.total - c.dead_letter - c.transfer_dead_letter


# ------------------------------------------------------------------ time windows

PROBE_PAGE = 16  # messages peeked per bisection step: the first one not scheduled is the probe


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


def _probe(conn: ConnectionLike, path: EntityPath, seq: int, stop: int, peeks: list[int]) -> tuple[int, Any] | None:
    """The first message at or after `seq` (up to `stop`) that was not scheduled, as (number,
    enqueued time): a scheduled message is numbered when it is scheduled but enqueued later, so
    its time says nothing about its neighbours'. None: no such message."""
    from .scan import peek_page

    while seq <= stop:
        page = peek_page(path, from_sequence_number=seq, max_messages=PROBE_PAGE, connection=conn)
        peeks[0] += 1
        for r in page:
            if int(r["sequence_number"]) > stop:
                return None
            if r.get("scheduled_enqueue_time") is None and r.get("enqueued_time") is not None:
                return int(r["sequence_number"]), r["enqueued_time"]
        if len(page) < PROBE_PAGE:
            return None
        seq = int(page[-1]["sequence_number"]) + 1
    return None


def _first_where(conn: ConnectionLike, path: EntityPath, low: int, high: int, holds: Any, peeks: list[int]) -> int:
    """The lowest s in low..high+1 such that the first message not scheduled at or after s (up to
    `high`) is missing or `holds(its enqueued time)`: a predicate that, once true, stays true in
    sequence order. Bisection, jumping past each probed message that fails it."""
    lo, hi = low, high + 1
    while lo < hi:
        mid = (lo + hi) // 2
        got = _probe(conn, path, mid, high, peeks)
        if got is not None and not holds(got[1]):
            lo = got[0] + 1
        else:
            hi = mid
    return lo


@renamed(conn="connection", path="entity", first="from_sequence_number", last="to_sequence_number")
def time_bounds(
    connection: ConnectionLike,
    entity: EntityPath,
    from_sequence_number: int,
    to_sequence_number: int,
    window: TimeWindow,
) -> WindowBounds | None:
    """The sequence numbers that hold the messages enqueued within `window`, among
    from_sequence_number..to_sequence_number (both included: the snapshot's bounds), found by
    bisection: about log2(to - from) peeks of one page per bound (None: no message can be in the
    window).

    Service Bus numbers messages in order of arrival, so the enqueued times of messages that were not
    scheduled grow with their numbers. A scheduled message is numbered when it is scheduled and
    enqueued later: its time is at or after that of every message numbered before it. So every message
    above `last` of the result is after the window, every message not scheduled below `first` is
    before it; a scheduled message below `first` can still be enqueued within the window: `sweep`
    says where to look for those (only when the entity holds scheduled messages now). The read
    filters rows by time, so the edges are exact."""
    conn, path, first, last = connection, entity, from_sequence_number, to_sequence_number
    peeks = [0]
    lo = first
    if window.after is not None:
        lo = _first_where(conn, path, first, last, lambda t: not window.below(t), peeks)
    hi = last
    if window.before is not None and lo <= last:
        end = _first_where(conn, path, lo, last, window.beyond, peeks)
        # Scheduled messages between `end` and the first message after the window stay in range.
        after = _probe(conn, path, end, last, peeks) if end <= last else None
        hi = after[0] - 1 if after is not None else last
    sweep = (first, lo - 1) if window.after is not None and lo > first and _may_hold_scheduled(conn, path) else None
    if lo > hi and sweep is None:
        return None
    return WindowBounds(lo, hi, sweep, peeks[0])


def _may_hold_scheduled(conn: ConnectionLike, path: EntityPath) -> bool:
    """Whether the entity (or, for a subscription, its topic) holds scheduled messages now; unknown
    (no Manage rights) counts as yes."""
    try:
        c = counts(path, connection=conn)
    except EntityNotFoundError:
        raise
    except SbError:
        return True
    return bool(c.scheduled)
