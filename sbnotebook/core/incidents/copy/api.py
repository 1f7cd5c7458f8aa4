"""Copying messages from one entity to a queue or topic, in the same namespace or another, by
peeking: nothing is locked, no delivery is counted, the source is left as it was.

The source is peeked page by page on the source's live connection; each message becomes a faithful
copy (``copies.copy_message(resubmission=False)``: body bytes, every property, the dead-letter
reason and description kept, time to live, a scheduled time still ahead) and goes through the one
send pipeline (``pipeline.send_all``: batches, at most ``max_in_flight`` sends, retries, one outcome
per message) on the target's connection.

Bounded in bytes: at most ``max_held_bytes`` (default ``defaults.MAX_HELD_BYTES``) of source
messages, by their encoded size, are in memory at once, counted from the moment a peek that may
bring them is sent until the target confirmed (or refused) each copy (or the copy skipped it). The
source is read ahead by ``copy_peeks.PeekAhead``: several peeks at once, each as soon as there is
room for its whole answer, so a message holds room for little more than a peek's round trip and a
send's. The copies go out in batches as the answers come (a ``FLUSH`` at the end of each).
``report.stats["peak_held_bytes"]`` and ``["peak_held"]`` are the most bytes and messages held.

Resumable, as an import is: a :class:`CopyProgress` records the source sequence numbers copied,
kept on disk while the copy is not complete. Interrupted, or the kernel restarted, the same call
copies only what is left. A copy's fresh message id is derived from the record's seed and the
source sequence number, so copies in flight at a kill, sent again, carry the same ids (a target with
duplicate detection drops them; without it they are duplicated, as for an import). A copy that
completed removes its record: the same call then copies everything again.

The seam: the record's file, key and contents (and when it is set aside) are ``copy_progress``'s;
this module has the copy's arguments checked, and which record they name (``copy_record``,
``copy_resume_point``). The copy's parts: ``copy_start.started_at`` (the progress a run resumes),
``copy_run.CopyRun`` (peek ahead, copy, follow each outcome, within ``max_held_bytes``),
``copy_run.send_copies`` (the send pipeline, the record kept if interrupted, the brake watching)
and ``copy_run.finished`` (the report's notes, the record removed once complete).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...connections.interrupts import answers_interrupts, before_anything
from ...connections.interrupts import interrupted as core_interrupted
from ...connections.live import LiveConnection
from ...connections.registry import ConnectionLike, live
from ...connections.syncforms import sync_form, taking_arguments_of
from ...defaults import MAX_HELD_BYTES, MAX_IN_FLIGHT, check_max_in_flight, check_whole_number
from ...entities import EntityPath
from ...errors import InvalidInputError
from ...operations.window import When, enqueued_window, given_text, locate
from ...outcome import Report
from ...rates import Rate, parse_rate
from ...renames import gathered, renamed
from ...tracing import operation
from ...views.search import WhereLike, as_where
from ..brake import Brake, check_brake
from ..canary import Canary, check_canary, fate
from ..stops import STOPS_GATHERED
from .progress import CopyProgress, created_times, load, record_key, record_path
from .run import CopyRun, finished, send_copies
from .start import started_at


def copy_target(target: str | EntityPath) -> EntityPath:
    """A copy goes to a queue or a topic: a subscription or a dead-letter queue cannot be sent to."""
    path = EntityPath.parse(target)
    if path.is_subscription or path.is_dead_letter:
        raise InvalidInputError(
            f"Copies go to a queue or a topic, not to {path}: Service Bus takes no messages sent to a "
            f"subscription or a dead-letter queue (copy to the topic {path.name}, or to a queue)."
        )
    return path


# Old keywords (docs/names.md), kept for one release: each says once what replaced it.
SAVE_GRACE = 2.0
"""Seconds an interrupted copy (one entity or a glob's) waits for its records to be saved before the
cell ends: the same command again reads them."""
COPY_RENAMED = {"limit": "max_messages", "keep_ids": "keep_message_id", "concurrency": "max_in_flight"}


@gathered(**STOPS_GATHERED)
@renamed(**COPY_RENAMED)
async def acopy(
    source: str | EntityPath,
    target: str | EntityPath,
    *,
    where: WhereLike = None,
    max_messages: int | None = None,
    keep_message_id: bool = False,
    max_in_flight: int = MAX_IN_FLIGHT,
    rate: Rate | None = None,
    max_held_bytes: int = MAX_HELD_BYTES,
    progress: Callable[[Report], None] | None = None,
    state: CopyProgress | None = None,
    source_connection: ConnectionLike = None,
    resume: bool = True,
    enqueued_after: When | None = None,
    enqueued_before: When | None = None,
    brake: Brake | None = None,
    canary: Canary | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Copy the messages of ``source`` (an entity, a subscription, a dead-letter queue), all or those
    ``where`` selects (a search, as for ``compile_where``), at most ``max_messages``, to the queue or topic
    ``target`` (see the module docstring), with at most ``max_in_flight`` sends in flight, and with a
    ``rate`` (``50/s``, ``3000/m``: ``core.parse_rate``) at most that many messages per second.
    ``source_connection``: the source's namespace (default: ``connection``, the target's). Fresh
    message ids (the original's in ``sbnotebook-original-message-id``) unless ``keep_message_id``.
    Resumable through its record on disk (see the module docstring; ``resume=False`` starts afresh,
    a ``where`` given as a function keeps no record). ``state``: a ``CopyProgress`` to resume and
    update instead (no record on disk). One ``sent`` or ``failed`` outcome per message;
    ``max_held_bytes``: source messages in memory at most, in bytes (``report.stats["peak_held_bytes"]``).
    ``enqueued_after`` / ``enqueued_before`` (a datetime, ISO 8601 or an age such as ``2h``): only
    messages enqueued within that window, found by a search over peeks (window.py). A search that
    raised on every message fails (``WhereFailed``); on some, the Report's ``stats["unevaluated"]``
    and a note say how many. ``brake`` (a ``Brake``) and ``canary`` (a ``Canary``) are resubmit's
    (``core.resubmit``): braked or after a canary, nothing more is copied and the same copy again
    copies the rest."""
    src_path = EntityPath.parse(source)
    dst_path = copy_target(target)
    if max_messages is not None:
        check_whole_number(max_messages, "max_messages")
    check_max_in_flight(max_in_flight)
    per_second = parse_rate(rate)
    check_whole_number(max_held_bytes, "max_held_bytes")
    check_brake(brake)
    check_canary(canary)
    matches = as_where(where)
    window = enqueued_window(enqueued_after, enqueued_before)
    dst = live(connection)
    src = dst if source_connection is None else live(source_connection)
    answers_interrupts()  # interrupted: the copies in flight confirmed, then its Report (connections/interrupts.py)
    try:
        # The window's numbers, found by blocking peeks: off the loop those peeks run on.
        span = False if window is None else await asyncio.to_thread(locate, src, src_path, window)
        given = (given_text(enqueued_after), given_text(enqueued_before))
        ends = (src, src_path, dst, dst_path)
        start = await started_at(*ends, where, keep_message_id, max_messages, state, resume, given)
    except asyncio.CancelledError:
        return before_anything(Report("copy", str(src_path), str(dst_path)))
    count = None if canary is None else canary.size
    run = CopyRun(src, src_path, start, matches=matches, keep_message_id=keep_message_id, max_messages=max_messages,
                  span=span, max_held_bytes=max_held_bytes, canary=count)  # fmt: skip
    run.rate, run.brake = per_second, brake
    with operation("copy", dst, dst_path, source=src_path) as traced:
        report = finished(await send_copies(run, dst, dst_path, max_in_flight, progress), run, dst_path)
        traced.report(report)
    if matches is not None:
        matches.check()  # raised on every message: a mistake, and nothing was sent
        if matches.errors:
            report.stats.update(matches.stats())
            report.note(f"{matches.describe()}: not copied")
    if canary is not None and not core_interrupted(report):  # the copies' fate, read at the target
        rest = "the same copy again without canary copies the rest" if run.paused else "nothing was left to copy"
        await fate(dst, dst_path, report, canary, brake, outcome="sent", rest=rest)
    return report


copy = sync_form(acopy, grace=SAVE_GRACE)


def _record_of(given: dict[str, Any]) -> tuple[Path, LiveConnection, EntityPath, LiveConnection, EntityPath]:
    """The file of the record a copy with these arguments (``acopy``'s, by name) keeps, and the
    copy's two ends: source connection and path, target connection and path."""
    if given["state"] is not None:
        raise InvalidInputError("A copy given state= keeps no record on disk: the state passed in is its progress.")
    if callable(given["where"]):
        raise InvalidInputError("A copy with a where function keeps no record on disk (it resumes only with state=).")
    dst = live(given["connection"])
    src = dst if given["source_connection"] is None else live(given["source_connection"])
    source, target = EntityPath.parse(given["source"]), EntityPath.parse(given["target"])
    window = (given_text(given["enqueued_after"]), given_text(given["enqueued_before"]))
    key = record_key(src, source, dst, target, given["where"], given["keep_message_id"], given["max_messages"], window)
    return record_path(key), src, source, dst, target


def _copy_record(given: dict[str, Any]) -> Path:
    """The file that records an unfinished copy made with these arguments (``acopy``'s: a copy's own
    can be given as they are); it exists only while such a copy is not complete. The source, the
    target, their connections, ``where``, ``keep_message_id`` and ``max_messages`` choose it; the other
    arguments change nothing here. A copy given ``state`` or a ``where`` function keeps no record:
    ``InvalidInputError``."""
    return _record_of(given)[0]


copy_record = taking_arguments_of(acopy, _copy_record)


def _copy_resume_point(given: dict[str, Any]) -> CopyProgress | None:
    """What an unfinished copy with these arguments (``acopy``'s, as for ``copy_record``) did, from
    its record on disk, or None (none, or its source or target was deleted and created again since:
    see ``copy_progress.created_times``). A copy with ``resume=False`` starts afresh all the same."""
    record, src, source, dst, target = _record_of(given)
    if not record.is_file():
        return None  # no unfinished copy: no creation times to ask the administration API for
    return load(record, created_times(src, source, dst, target))[0]


copy_resume_point = taking_arguments_of(acopy, _copy_resume_point)
