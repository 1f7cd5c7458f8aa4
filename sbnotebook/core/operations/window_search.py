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

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from ..connections.registry import ConnectionLike, live
from ..entities import EntityPath
from .bounds import (
    BOUND_WINDOW,
    SLACK,
    TimeWindow,
    WindowBounds,
    first_present,
    last_present,
    message_count,
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


def last_page(conn: ConnectionLike, path: EntityPath, first: int, count: int) -> LastPage:
    """The page of ``PAGE_SIZE`` messages that ends ``BOUND_WINDOW`` numbers past where a densely
    numbered entity holding ``count`` messages from ``first`` ends: one round trip. A full page (the
    end is further: producers, holes) or an empty one (messages taken meanwhile) leaves the end to
    ``last_present``'s search, and the page unused."""
    guess = first + max(count, 1) - 1
    start = max(first, guess + BOUND_WINDOW - PAGE_SIZE + 1)
    c = live(conn)
    page = c.run_on(path, apeek_once(c, path, start, PAGE_SIZE))
    if page and len(page) < PAGE_SIZE:
        return LastPage(start, tuple(page), int(page[-1].sequence_number), True)
    return LastPage(start, (), last_present(conn, path, first, count), False)


def window_bounds(conn: ConnectionLike, path: EntityPath, start: int, window: TimeWindow) -> WindowBounds | None:
    """``snapshot`` and ``time_bounds`` with their round trips overlapped (see the module docstring),
    each edge left undecided by at most ``SLACK`` numbers (the core's windowed reads keep each
    message by its time). With the window's messages in the last page, ``head`` holds them: the read
    is done."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        counting = pool.submit(message_count, conn, path)
        first = first_present(conn, path, start)
        count = counting.result()
        if first is None or window.empty:
            return None
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
            return window.below(t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC))
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
