"""What is still there after an operation that was asked to take everything (purge, resubmit,
discard), read from the broker: a scan (peek) of the entity, and one ``left`` outcome per message
still there of the kinds asked for, saying why. A report that leaves messages never looks complete.

Why, from what a peek shows: ``locked by another receiver`` (a peek carries the lock's end,
``x-opt-locked-until``, while another receiver holds the message), ``arrived while ... ran``
(enqueued after the operation began), else ``still there``: what the peek shows (not locked now,
enqueued before the operation began), or what the caller knows of how its run passed them (a
resubmit: it ended when its receive got nothing within its wait); why the run did not take them (another
receiver held them then and gave them back, a slow delivery, ...) the broker does not say. Or the
caller's reason when it knows one (its work on them failed). One note per reason says how many, and
what to do.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

from .entities import EntityPath
from .live import LiveConnection
from .messages import message_id
from .outcome import Outcome, Report
from .scan import ascan, message_state

log = logging.getLogger("sbnotebook.core.leftovers")

ARRIVAL_MARGIN = dt.timedelta(seconds=2)  # enqueued this close before the operation began: arrived during it
LOCKED_UNTIL = b"x-opt-locked-until"
LOCKED = "locked by another receiver"
# Only what the peek shows: not locked now, and there before the operation began.
STILL_THERE = "still there: not locked, and enqueued before the {op} began"


def utc(value: dt.datetime | None) -> dt.datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def locked_until(m: Any, now: dt.datetime) -> dt.datetime | None:
    """When a peeked message's lock ends, if a receiver holds it now; else None."""
    value = (m.raw_amqp_message.annotations or {}).get(LOCKED_UNTIL)
    until = utc(value) if isinstance(value, dt.datetime) else None
    if isinstance(value, int) and value > 0:  # an AMQP timestamp: milliseconds since the epoch
        until = dt.datetime.fromtimestamp(value / 1000.0, dt.UTC)
    return until if until is not None and until > now else None


async def account_for_what_is_left(
    conn: LiveConnection,
    path: EntityPath,
    report: Report,
    *,
    asked: Collection[str],
    since: dt.datetime,
    again: str,
    verb: str,
    skip: Collection[int] = (),
    match: Callable[[Any], bool] | None = None,
    not_asked: str = "not asked for: left as they are",
    session_id: str | None = None,
    unexplained: str | None = None,
    still_there: str | None = None,
) -> None:
    """Peek what ``path`` still holds. Each message in a state of ``asked`` (active, deferred,
    scheduled), not in ``skip`` (sequence numbers the report already accounts for) and matching
    ``match`` gets a ``left`` outcome with why; messages in other states are counted in one note
    (``not_asked``). ``since``: when the operation began; ``again``: what to run ("purge again"), to
    ``verb`` them ("remove"). ``session_id``: peek that session (accepted for the peek) instead.
    ``unexplained``: the reason of messages not locked by another receiver, when the caller knows it
    (the operation failed on them), instead of ``arrived while ...`` or ``still there``.
    ``still_there``: the reason of messages neither locked nor new, when the caller knows more than
    the peek shows (how its run passed them); else ``STILL_THERE``."""
    now = dt.datetime.now(dt.UTC)
    op = report.operation
    why: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    lock_ends: dt.datetime | None = None
    where = f"session {session_id!r}: " if session_id is not None else ""
    async for page in ascan(path, session_id=session_id, connection=conn):
        for m in page:
            seq = int(m.sequence_number or 0)
            if seq in skip or (match is not None and not match(m)):
                continue
            state = message_state(m)
            if state not in asked:
                kept[state] += 1
                continue
            until = locked_until(m, now)
            enqueued = utc(m.enqueued_time_utc)
            if until is not None:
                reason = LOCKED
                lock_ends = until if lock_ends is None else max(lock_ends, until)
            elif unexplained is not None:
                reason = unexplained
            elif enqueued is not None and enqueued >= since - ARRIVAL_MARGIN:
                reason = f"arrived while the {op} ran"
            else:
                reason = still_there if still_there is not None else STILL_THERE.format(op=op)
            why[reason] += 1
            report.add(Outcome(message_id(m), seq, "left", reason if state == "active" else f"{state}: {reason}"))
    for reason, n in why.most_common():
        text = f"{where}{n} left: {reason}"
        if reason == LOCKED and lock_ends is not None:
            text += f" ({again} after their locks expire, about {lock_ends:%H:%M:%S} UTC)"
        else:
            text += f" ({again} to {verb} them)"
        report.note(text)
        log.info("%s of %s: %s", op, path, text)
    if kept:
        report.note(where + ", ".join(f"{n} {s}" for s, n in kept.items()) + f" message(s) {not_asked}")
