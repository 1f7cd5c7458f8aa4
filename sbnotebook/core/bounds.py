"""Where an entity's messages begin and end now, in sequence numbers, found by peeking.

Sequence numbers only grow (per queue or topic), so the highest number present now bounds every
message that was there: the Spark reader plans a snapshot read up to it, and a live tail
(``tail.py``) shows only what arrives after it."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from .counts import counts
from .entities import EntityPath
from .errors import EntityNotFoundError, SbError
from .live import ConnectionLike, live
from .scan import peek_numbers

# Messages peeked at the expected end of the entity. A short window has seen the end; a full one
# (producers faster than a round trip, or holes in the numbering) falls back to a search. 32
# messages cover a producer sending 640 messages a second at 50 ms per round trip.
BOUND_WINDOW = 32
GALLOP_STEP = 1024  # the first step of the search for the end when there is no count to guess from

log = logging.getLogger(__name__)


def first_present(conn: ConnectionLike, path: EntityPath, start: int) -> int | None:
    """The lowest sequence number present from `start` on: one peek of one message."""
    got = peek_numbers(path, start=max(start, 1), count=1, connection=conn)
    return got[0] if got else None


def snapshot(conn: ConnectionLike, path: str | EntityPath, start: int) -> tuple[int, int] | None:
    """The lowest and highest sequence numbers present from `start` on, now (None: no message).

    Every message enqueued after this returns has a higher number than the second one, and every
    message present before it was called has a number at most that. Costs two round trips when the
    numbering is dense: the count (administration API) and the first number (a peek) at once, then
    one peek of ``BOUND_WINDOW`` messages where the count says the end is. Without the count (no
    Manage rights) the end is searched, logged once."""
    path = EntityPath.parse(path)
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
    window = peek_numbers(path, start=guess, count=BOUND_WINDOW, connection=conn)
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
