"""Moving messages (typically out of a dead-letter queue) without ever losing one.

For each message: the copy is sent and confirmed first, the original completed second
(``copies.acopy_then_complete``, which also says what the copy keeps). A crash in between leaves a
duplicate, never a gap. Messages a filter does not select are released (given back without raising
their delivery count), not abandoned.

Bulk work (10^6 messages) streams: up to ``max_in_flight`` batches are moved at once (send the
copies, complete the originals), each worker receiving its next batch meanwhile, so that up to twice
as many are locked at a moment (``resubmit/workers.py``, started and ended by the run:
``resubmit/run.py``); nothing is kept per moved message (the Report counts past its detail limit),
and ``progress(report)`` is called after each batch.

Interrupted (a kernel interrupt, a cancelled task: ``connections/interrupts.py``), a run takes no
more messages, finishes each batch in flight (copies confirmed, then originals completed) or gives
it back whole (released, no copy sent), and returns its Report, marked interrupted, its counts those
the broker confirmed: no message is left locked, and none is in both places unless its original
could not be completed after its copy was confirmed (``duplicated``). What was moved, and those
duplicated, are recorded (``resubmit/progress.py``); the same call with ``resume=True`` continues the
run: it moves what is left, its ``max_messages`` counting what the earlier runs moved, and completes
the duplicated originals without copying them again. Killed (the process ends), the same call again
finishes what is left: the originals not completed are still there, and the copies already sent
carry the same message id again (``copy_id``, or the original's with ``keep_message_id``), so a
target with duplicate detection drops them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...connections.interrupts import interrupted as core_interrupted
from ...connections.registry import ConnectionLike, live
from ...connections.syncforms import sync_form
from ...defaults import MAX_IN_FLIGHT
from ...entities import EntityPath
from ...errors import EntityNameError, InvalidInputError
from ...operations.window import When, enqueued_window
from ...outcome import Outcome, Report
from ...rates import Rate, parse_rate
from ...renames import gathered, renamed
from ...tracing import operation
from ...views.search import WhereLike, as_where
from ..brake import Brake, check_brake
from ..canary import Canary, check_canary, fate
from ..stops import STOPS_GATHERED
from .progress import ResubmitProgress, load, record_path, save
from .run import BATCH_SIZE, check_limit, moved

Record = dict[str, Any]


def _fan_out_refused(source: EntityPath) -> EntityNameError:
    return EntityNameError(
        f"Resubmitting from '{source}' needs an explicit target: sending to topic '{source.name}' would "
        "deliver the copy to every subscription, not only this one. Name a queue that your processing "
        f"reads (target='retry-queue'), or pass target='{source.name}' with allow_fan_out=True."
    )


def default_target(source: EntityPath) -> EntityPath:
    """Where a resubmitted message goes when no target is named: a queue's DLQ goes back to the queue.
    A subscription's DLQ has no safe default: sending to the topic reaches every subscription."""
    if source.is_subscription:
        raise _fan_out_refused(source)
    return source.parent


def _target(src: EntityPath, target: str | EntityPath | None, allow_fan_out: bool) -> EntityPath:
    dst = EntityPath.parse(target) if target is not None else default_target(src)
    if src.is_subscription and dst.name.lower() == src.name.lower() and not allow_fan_out:
        raise _fan_out_refused(src)
    return dst


def _resumed(
    record: Path, resume: bool, src: EntityPath, dst: EntityPath
) -> tuple[ResubmitProgress | None, int | None]:
    """The unfinished runs' record (resumed or not, the copies it holds are not sent again) and,
    resumed, how many those runs moved."""
    earlier = load(record)
    if resume and earlier is None:
        raise InvalidInputError(
            f"Nothing to resume: no resubmit from {src} to {dst} was left unfinished (the last one finished)."
        )
    return earlier, earlier.moved if resume and earlier is not None else None


def _this_run(max_messages: int | None, before: int | None, canary: Canary | None) -> int | None:
    """How many this run may move: what is left of ``max_messages`` after the runs ``before`` it, at
    most a canary's size; None: no bound."""
    limit = None if max_messages is None else max_messages - (before or 0)
    return canary.size if canary is not None and (limit is None or canary.size < limit) else limit


@gathered(**STOPS_GATHERED)
@renamed(limit="max_messages")
async def aresubmit(
    source: str | EntityPath,
    *,
    target: str | EntityPath | None = None,
    where: WhereLike = None,
    edit: Callable[[Record], Record | None] | None = None,
    max_messages: int | None = None,
    keep_message_id: bool = False,
    allow_fan_out: bool = False,
    max_in_flight: int = MAX_IN_FLIGHT,
    rate: Rate | None = None,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[Report], None] | None = None,
    enqueued_after: When | None = None,
    enqueued_before: When | None = None,
    resume: bool = False,
    brake: Brake | None = None,
    canary: Canary | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Move messages from ``source`` to ``target``: copy first, complete second.

    ``where`` selects messages (a search expression, see ``compile_where``, or a function of a
    record; others are released untouched; one that raised on every message fails before anything
    moves, on some they are counted in the Report's stats and notes); ``enqueued_after`` /
    ``enqueued_before`` (a datetime, ISO 8601, or an age such as ``2h``) only messages enqueued within
    that window; ``edit(record)`` returns the record to send (its ``body``/``body_text``/properties
    changed) or None to leave the message where it is. One outcome per message: resubmitted, skipped,
    duplicated or failed. ``progress(report)`` after each batch, ``on_outcome(outcome)`` with each
    outcome as it is known, past the Report's detail limit too (both from the connection's thread).
    ``rate`` (``50/s``, ``3000/m``: ``core.parse_rate``) holds the run to that many messages per
    second, ``max_in_flight`` still the cap on batches moved at once. ``brake`` (a ``core.Brake``)
    stops the run when more come back dead-lettered, or a backlog grows, than it allows; ``canary``
    (a ``core.Canary``) moves its size, says from the broker what the consumer made of them and moves
    nothing more. Interrupted, it ends the batches in flight (none cut in two) and returns its Report
    (``core.interrupted(report)`` is True). Stopped any of these ways, the same call with
    ``resume=True`` moves the rest, nothing twice (``max_messages`` counts over the whole run; see the
    module docstring). The old keywords (``stop_if_dead_letters=`` ..., ``canary=K``,
    ``canary_timeout=``) are taken for one release, with a warning."""
    src = EntityPath.parse(source)
    dst = _target(src, target, allow_fan_out)
    check_limit(max_messages, max_in_flight, batch_size)
    per_second = parse_rate(rate)
    check_brake(brake)
    check_canary(canary)
    matches = as_where(where)  # a bad expression fails before anything is received
    window = enqueued_window(enqueued_after, enqueued_before)
    conn = live(connection)
    record = record_path(conn, src, dst)
    earlier, before = _resumed(record, resume, src, dst)
    limit = _this_run(max_messages, before, canary)
    if limit is not None and limit < 1:  # the run moved what it was asked to: nothing more, its record done with
        save(record, earlier if earlier is not None and earlier.copied else None)
        return Report("resubmit", str(src), str(dst), notes=[f"resumed: the {max_messages} asked for were moved"])
    with operation("resubmit", conn, dst, source=src) as span:
        report = await moved(conn, src, dst, window=window, where=matches, edit=edit, limit=limit,
                             keep_message_id=keep_message_id, max_in_flight=max_in_flight, batch_size=batch_size,
                             progress=progress, earlier=earlier, record=record, before=before, rate=per_second,
                             brake=brake, paused=canary is not None, on_outcome=on_outcome)  # fmt: skip
        span.report(report)
    if canary is not None and not core_interrupted(report):  # the copies' fate, read at the target
        await fate(conn, dst, report, canary, brake)
    return report


def resubmit_resume_point(
    source: str | EntityPath,
    *,
    target: str | EntityPath | None = None,
    allow_fan_out: bool = False,
    connection: ConnectionLike = None,
) -> ResubmitProgress | None:
    """What the unfinished runs of a resubmit from ``source`` to ``target`` (``resubmit``'s) did,
    from its record on disk: how many they moved, and the originals whose copies are in the target
    (completed by the next run without another copy); None when the last run finished."""
    src = EntityPath.parse(source)
    return load(record_path(live(connection), src, _target(src, target, allow_fan_out)))


resubmit = sync_form(aresubmit)
