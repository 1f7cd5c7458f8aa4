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

A session-enabled entity cannot be peeked without a session: what its purge left is counted by the
administration API instead (``count_what_sessions_left``), and when that is refused the report says
the purge is not confirmed complete.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

from ..connections.live import LiveConnection
from ..entities import EntityPath
from ..errors import SbError
from ..operations.counts import counts
from ..operations.messages import message_id
from ..operations.scan import ascan, message_state
from ..outcome import Outcome, Report
from ..sdk.failures import is_unauthorized
from ..times import utc

log = logging.getLogger("sbnotebook.core.incidents.leftovers")
purge_log = logging.getLogger(
    "sbnotebook.core.incidents.purge.api"
)  # the purge's logger: one place to turn its lines on

ARRIVAL_MARGIN = dt.timedelta(seconds=2)  # enqueued this close before the operation began: arrived during it
LOCKED_UNTIL = b"x-opt-locked-until"
LOCKED = "locked by another receiver"
# Only what the peek shows: not locked now, and there before the operation began.
STILL_THERE = "still there: not locked, and enqueued before the {op} began"


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
    numbers: tuple[int, int | None] = (1, None),
) -> None:
    """Peek what ``path`` still holds. Each message in a state of ``asked`` (active, deferred,
    scheduled), not in ``skip`` (sequence numbers the report already accounts for) and matching
    ``match`` gets a ``left`` outcome with why; messages in other states are counted in one note
    (``not_asked``). ``since``: when the operation began; ``again``: what to run ("purge again"), to
    ``verb`` them ("remove"). ``session_id``: peek that session (accepted for the peek) instead.
    ``unexplained``: the reason of messages not locked by another receiver, when the caller knows it
    (the operation failed on them), instead of ``arrived while ...`` or ``still there``.
    ``still_there``: the reason of messages neither locked nor new, when the caller knows more than
    the peek shows (how its run passed them); else ``STILL_THERE``. ``numbers``: the sequence numbers
    to peek, first and past the last (None: to the end): what the operation could have taken (a
    window's), so what it left is counted without reading the whole entity."""
    now = dt.datetime.now(dt.UTC)
    op = report.operation
    why: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    lock_ends: dt.datetime | None = None
    where = f"session {session_id!r}: " if session_id is not None else ""
    async for page in ascan(
        path, from_sequence_number=numbers[0], before_sequence_number=numbers[1], session_id=session_id, connection=conn
    ):
        for m in page:
            seq = int(m.sequence_number or 0)
            if seq in skip or (match is not None and not match(m)):
                continue
            state = message_state(m)
            if state not in asked:
                kept[state] += 1
                continue
            until = locked_until(m, now)
            enqueued = None if m.enqueued_time_utc is None else utc(m.enqueued_time_utc)
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


async def what_purge_left(
    conn: LiveConnection, path: EntityPath, report: Report, *, asked: Collection[str], since: dt.datetime, **more: Any
) -> None:
    """``account_for_what_is_left`` in a purge's words (``purge again`` to ``remove`` them); ``more``
    as it takes them (a session, a window's numbers, ...)."""
    await account_for_what_is_left(
        conn, path, report, asked=asked, since=since, again="purge again", verb="remove", **more
    )


async def count_what_sessions_left(
    conn: LiveConnection,
    path: EntityPath,
    report: Report,
    active: bool,
    deferred: bool,
    scheduled: bool,
    held: list[str],
    failed: dict[str, str],
) -> None:
    """The end of a session-enabled entity's purge (a peek needs a session there): ask the
    administration API what is still there. A session Service Bus does not list (nothing but
    deferred or scheduled messages, no state) is not purged, nor is one another receiver holds
    (``held``); each message left of a kind asked for gets a ``left`` outcome, the held sessions
    named in its reason (the counts are the entity's: which session holds which is not known), as
    are the sessions whose purge failed (``failed``: session id -> why). If nothing can be counted
    after such a failure, an error of the report says so: the purge must not look complete.
    Service Bus counts deferred messages as active, so with only one of the two asked for, the
    active count is not split: a note says so. Without Manage rights nothing is counted: an error
    of the report says so too (an unlisted session may hold messages), and ``ok`` is False."""
    try:
        left = await asyncio.to_thread(counts, path, connection=conn)
    except SbError as exc:
        purge_log.info("purge of %s: could not count what is left (%s)", path, exc)
        for reason in failed.values():
            report.error(f"{reason}; what it still holds was not counted")
        # Unconfirmed is not complete: a session Service Bus does not list may still hold messages.
        report.error(f"what is left in {path} was not counted, so the purge is not confirmed complete: {_why(exc)}")
        return
    found = left.active  # a dead-letter queue needs no session: it is scanned, never counted here
    n = (found if active and deferred else 0) + (left.scheduled if scheduled else 0)
    if active != deferred and found:
        report.note(f"{found} active or deferred message(s) are still there (Service Bus counts the two together)")
    if not n:
        return
    names = ", ".join(repr(s) for s in held)
    in_held = f"in session(s) held by another receiver ({names}; purge again once it lets them go), " if held else ""
    in_failed = f"in session(s) whose purge failed ({'; '.join(failed.values())}), " if failed else ""
    reason = (
        f"in {path}: {in_held}{in_failed}new arrivals, or in sessions Service Bus does not list (nothing but"
        " deferred or scheduled messages, no session state): name those with session_ids"
    )
    for _ in range(n):  # counted by the broker, not named: one outcome each, so the total adds up
        report.add(Outcome(None, None, "left", reason))
    report.note(f"{n} left: {reason}")


def _why(exc: SbError) -> str:
    """Why what a session-enabled entity's purge left could not be counted, and what to do."""
    if not is_unauthorized(exc):
        return str(exc)
    return (
        "the administration API refused the key (counting needs the 'Manage' right), and Service Bus does not list"
        " sessions holding nothing but deferred or scheduled messages, so those were not purged nor seen. Purge"
        " with a key that has Manage, or name the sessions with session_ids (each is then checked through its lock)"
    )
