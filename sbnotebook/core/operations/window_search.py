"""Where the core's windowed reads find a window's messages: ``window_bounds``, the snapshot and the
search (bounds.py's ``time_bounds``) with their round trips overlapped, and for a window that runs to
the entity's end (``enqueued_after`` alone: "since 14:00", "the last 2h"), the entity's last page
peeked in the search's first round.

Far from the namespace the rounds are the cost: the count and the first message at once (one round),
then the search's first round of probes, with, in the same round, the check of where the entity ends
(bounds.py's ``last_present``) or, for a window to the end, a peek of its last page where the count
says it ends. That page is the end's check (a page that is not full has seen the end) and, when the
window starts within it (the page's first message is before the window, or the probes say the edge
is in it), the window's read itself: two rounds in all, where the read would be a third.

A wrong guess costs nothing but the page's bytes: the page's messages are kept by their own times
as any read's are, and a window that starts before the page is read as the search found it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from ..connections.registry import ConnectionLike, live
from ..entities import EntityPath
from ..times import utc
from .bounds import (
    BOUND_WINDOW,
    SLACK,
    TimeWindow,
    WindowBounds,
    counts_or_none,
    first_present,
    held,
    last_present,
    may_hold_scheduled,
    time_bounds,
)
from .scan import PAGE_SIZE, apeek_once


@dataclass(frozen=True)
class LastPage:
    """One peek where the count says an entity ends: its messages from ``start`` on, every one
    there was up to ``end`` when ``complete`` (the page was not full: it saw the end)."""

    start: int
    messages: tuple[Any, ...]
    end: int
    complete: bool


def page_ending_near(conn: ConnectionLike, path: EntityPath, lowest: int, end: int) -> LastPage:
    """The page of ``PAGE_SIZE`` messages (none below ``lowest``) that ends ``BOUND_WINDOW`` numbers
    past ``end``, a guess of where the entity ends: one round trip. ``complete`` when it was not full
    (it saw the end); a full page (the end is further: producers, holes) or an empty one (messages
    taken meanwhile) keeps no message."""
    start = max(lowest, end + BOUND_WINDOW - PAGE_SIZE + 1)
    c = live(conn)
    page = c.run_on(path, apeek_once(c, path, start, PAGE_SIZE))
    if page and len(page) < PAGE_SIZE:
        return LastPage(start, tuple(page), int(page[-1].sequence_number), True)
    return LastPage(start, (), end, False)


def last_page(conn: ConnectionLike, path: EntityPath, first: int, count: int) -> LastPage:
    """``page_ending_near`` where a densely numbered entity holding ``count`` messages from ``first``
    ends; when the page did not see the end, the end from ``last_present``'s search."""
    page = page_ending_near(conn, path, first, first + max(count, 1) - 1)
    return page if page.complete else replace(page, end=last_present(conn, path, first, count))


def window_bounds(conn: ConnectionLike, path: EntityPath, start: int, window: TimeWindow) -> WindowBounds | None:
    """``snapshot`` and ``time_bounds`` with their round trips overlapped (see the module docstring),
    each edge left undecided by at most ``SLACK`` numbers (the core's windowed reads keep each
    message by its time). With the window's messages in the last page, ``head`` holds them: the read
    is done."""
    remembered = live(conn).ends.get(path) if window.before is None and window.after is not None else None
    with ThreadPoolExecutor(max_workers=3) as pool:
        counting = pool.submit(counts_or_none, conn, path)
        # A window to the end, on an entity whose end a peek saw before: its page there, in this round
        near = pool.submit(page_ending_near, conn, path, start, remembered) if remembered is not None else None
        first = first_present(conn, path, start)
        counted = counting.result()
        count = None if counted is None else held(counted, path)
        if first is None or window.empty:
            return None
        if near is not None:
            found = _within_page(near.result(), first, may_hold_scheduled(counted), window)
            if found is not None:
                return found if count is None else _dense(found, count, first, found.last)
        if count is None:
            return time_bounds(conn, path, first, last_present(conn, path, first, None), window, slack=SLACK)
        guess = first + max(count, 1) - 1
        if window.before is not None:
            checked = pool.submit(last_present, conn, path, first, count)
            found = time_bounds(conn, path, first, guess, window, end=checked.result, slack=SLACK)
            return _dense(found, count, first, checked.result())
        peeked = pool.submit(last_page, conn, path, first, count)
        found = time_bounds(conn, path, first, guess, window, end=lambda: peeked.result().end, slack=SLACK)
        return _dense(with_last_page(found, peeked.result(), first, window), count, first, peeked.result().end)


def _within_page(page: LastPage, first: int, scheduled: bool, window: TimeWindow) -> WindowBounds | None:
    """The window (to the entity's end) read from ``page`` alone, when the page says so: it saw the
    end, and either it starts at or below ``first`` (it holds every message there is), or its first
    message not scheduled is before the window and the entity holds no scheduled message (then every
    message below the page is before the window: times grow with numbers). Else None: searched."""
    if not page.complete or first > page.end:
        return None
    if page.start > first and (scheduled or not _before_the_window(page, window)):
        return None
    lo = max(first, page.start)
    return WindowBounds(lo, page.end, None, 1, tuple(m for m in page.messages if int(m.sequence_number) >= lo))


def _dense(found: WindowBounds | None, count: int, first: int, end: int) -> WindowBounds | None:
    """``found`` with how densely the entity is numbered: a dead-letter queue holds a few of its
    entity's numbers, so its reads peek wider windows (``ascan_range``)."""
    return None if found is None else replace(found, density=min(1.0, max(count, 1) / max(1, end - first + 1)))


def _before_the_window(page: LastPage, window: TimeWindow) -> bool:
    """Whether the page's first message not scheduled is before the window: then so is every message
    not scheduled below the page (the times of those grow with their numbers)."""
    for m in page.messages:
        t = m.enqueued_time_utc
        if m.scheduled_enqueue_time_utc is None and t is not None:
            return window.below(utc(t))
    return False


def with_last_page(found: WindowBounds | None, page: LastPage, first: int, window: TimeWindow) -> WindowBounds | None:
    """``found`` (a window to the entity's end) with the last page as its read when the window starts
    within the page; else ``found`` as it is. Numbers between the search's edge and the page hold no
    message of the window but scheduled ones: the sweep below the window takes them in, when the
    entity holds scheduled messages (the search said so only if it left numbers below its edge)."""
    if found is None or not page.complete or found.last != page.end or found.first > found.last:
        return found
    if found.first < page.start and not _before_the_window(page, window):
        return found  # the window may start before the page: read as the search found it
    lo, sweep = max(found.first, page.start), found.sweep
    if lo > found.first:
        if sweep is not None:
            sweep = (sweep[0], lo - 1)
        elif found.first == first:
            return found  # whether scheduled messages sit below the page is not known: read as found
    head = tuple(m for m in page.messages if lo <= int(m.sequence_number) <= found.last)
    return replace(found, first=lo, sweep=sweep, head=head)
