"""Moving messages (typically out of a dead-letter queue) without ever losing one.

For each message: the copy is sent and confirmed first, the original completed second
(``copies.acopy_then_complete``, which also says what the copy keeps). A crash in between leaves a
duplicate, never a gap. Messages a filter does not select are released (given back without raising
their delivery count), not abandoned.

Bulk work (10^6 messages) streams: up to ``max_in_flight`` batches are on their way at once (receive,
send the copies, complete the originals: ``resubmit_batches.py``), nothing is kept per moved message
(the Report counts past its detail limit), and ``progress(report)`` is called after each batch.

Interrupted (a kernel interrupt, a cancelled task: ``connections/interrupts.py``), a run takes no
more messages, finishes each batch in flight (copies confirmed, then originals completed) or gives
it back whole (released, no copy sent), and returns its Report, marked interrupted, its counts those
the broker confirmed: no message is left locked, and none is in both places unless its original
could not be completed after its copy was confirmed (``duplicated``). What was moved, and those
duplicated, are recorded (``resubmit_record.py``); the same call with ``resume=True`` continues the
run: it moves what is left, its ``max_messages`` counting what the earlier runs moved, and completes
the duplicated originals without copying them again. Killed (the process ends), the same call again
finishes what is left: the originals not completed are still there, and the copies already sent
carry the same message id again (``copy_id``, or the original's with ``keep_message_id``), so a
target with duplicate detection drops them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..connections.interrupts import answers_interrupts, mark_interrupted, taken_back, uninterrupted
from ..connections.interrupts import interrupted as core_interrupted
from ..connections.live import LiveConnection
from ..connections.registry import ConnectionLike, live
from ..connections.syncforms import sync_form
from ..defaults import MAX_IN_FLIGHT, check_max_in_flight
from ..entities import EntityPath
from ..errors import EntityNameError, InvalidInputError
from ..operations.bounds import TimeWindow
from ..operations.scan import anything_there
from ..operations.window import When, enqueued_window
from ..outcome import Outcome, Report
from ..rates import Rate, TokenBucket, parse_rate
from ..renames import renamed
from ..sdk.failures import from_sdk
from ..tracing import operation
from ..views.search import WhereLike, as_where
from .brake import WATCH_INTERVAL, Brake, Watch, brake_of, watched, watched_entities
from .brake import started as watch_started
from .canary import CANARY_TIMEOUT, check_canary, fate
from .leftovers import account_for_what_is_left
from .resubmit_batches import Job, Run, seq_of, worker
from .resubmit_record import ResubmitProgress, load, record_path, save
from .selection import Selection, peeked_selection

log = logging.getLogger(__name__)
Record = dict[str, Any]

BATCH_SIZE = 50  # messages per batch


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


async def _resubmit(
    conn: LiveConnection,
    src: EntityPath,
    dst: EntityPath | None,
    *,
    where: Callable[[Record], bool] | None,
    edit: Callable[[Record], Record | None] | None,
    limit: int | None,
    keep_message_id: bool,
    max_in_flight: int,
    batch_size: int,
    progress: Callable[[Report], None] | None = None,
    window: TimeWindow | None = None,
    earlier: ResubmitProgress | None = None,
    record: Path | None = None,
    before: int | None = None,
    rate: float | None = None,
    brake: Brake | None = None,
    paused: bool = False,
) -> Report:
    """Copy first (send), complete second (one request per batch), with up to ``max_in_flight``
    batches on their way at once (each worker: receive, send the copies, complete the originals),
    so a batch costs about three round trips and ``max_in_flight`` of them overlap. Interrupted,
    it takes no more messages, ends the batches in flight and returns its Report (the module
    docstring). ``earlier``: the record of the runs before (its copies are not sent again), kept
    up to date in ``record``; ``before``: the messages they moved (a resumed run; None: not resumed);
    ``brake``: what stops the run on its own (brake.py), read first before anything moves."""
    answers_interrupts()
    watch = None if brake is None or dst is None else await watch_started(conn, brake, dst)
    started = time.perf_counter()
    report = Report("resubmit" if dst is not None else "discard", str(src), str(dst) if dst else None)
    report.stats.update(batches=0, workers=0)
    run = Run(report, limit, None, progress, in_target=dict(earlier.copied) if earlier else {})
    run.bucket = None if rate is None else TokenBucket(rate)
    if watch is not None and src.is_dead_letter and str(src.parent) in watch.entities:
        watch.taken = lambda: run.moved  # the source is a watched dead-letter queue: what left it is not counted out
    job = Job(conn, src, dst, edit, keep_message_id, batch_size, max_in_flight)
    workers: set[asyncio.Task[None]] = set()

    def start_worker(first: bool) -> None:
        run.workers += 1
        report.stats["workers"] = max(report.stats["workers"], run.workers)
        workers.add(asyncio.create_task(worker(job, run, start_worker, first)))

    try:
        await _run(job, run, workers, start_worker, where, window, watch)
    except asyncio.CancelledError:
        run.stop = run.interrupted = True
        taken_back()  # answered with the Report below
        log.info("%s of %s interrupted: ending the batches in flight", report.operation, src)
    except Exception as exc:
        if not run.moved and not run.copied:
            raise  # nothing moved: the caller may reconnect and start again
        _note_the_stop(run, src, exc)
    finally:
        await _wind_up(run, workers, started)
    if run.interrupted:
        _say_interrupted(run, src, dst)
    elif watch is not None and watch.why is not None:
        await watch.said(run.report, run.moved, src)
    if before is not None:
        report.note(f"resumed: {before} moved before")
    if record is not None and dst is not None:
        complete = report.ok and not run.in_target and not paused  # paused: a canary, the rest to come
        moved = (before or 0) + run.moved
        save(record, None if complete else ResubmitProgress(str(src), str(dst), moved, run.in_target))
    return report


async def _run(
    job: Job,
    run: Run,
    workers: set[asyncio.Task[None]],
    start_worker: Callable[[bool], None],
    where: Callable[[Record], bool] | None,
    window: TimeWindow | None,
    watch: Watch | None = None,
) -> None:
    """The selection found (with ``where`` or a window), the workers started (with the brake's watch
    beside them) and ended, and what is left accounted for."""
    since = dt.datetime.now(dt.UTC)
    limit = run.limit
    if where is not None or window is not None:
        run.selection = await peeked_selection(job.conn, job.src, where, limit, window)
        _say_unevaluated(run.report, run.selection)
        # With a selection the limit is on the selected messages (it ends the selection), not on the
        # messages received on the way past unselected ones.
        run.limit = None
    watching = None
    if run.selection is None or run.selection.count:
        if watch is not None:
            watching = asyncio.create_task(watch.watch(functools.partial(_brake, run)))
        start_worker(True)
    try:
        await _until_all_ended(workers, run)
    finally:
        if watching is not None:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
    if (limit is None or run.moved < limit) and await anything_there(job.conn, job.src):
        await _account_for_the_rest(job.conn, job.src, job.dst, run, since)


def _say_unevaluated(report: Report, selection: Selection | None) -> None:
    """What the where could not evaluate when the selection was made: the Report's stats and a note."""
    if selection is not None and selection.unevaluated_text is not None:
        report.stats.update(selection.unevaluated)
        report.note(f"{selection.unevaluated_text}: not taken")


async def _until_all_ended(workers: set[asyncio.Task[None]], run: Run) -> None:
    """Wait for every worker, those started meanwhile included. The first failure stops the others
    and is raised once all have ended."""
    failure: BaseException | None = None
    while workers:
        # Workers start while others run: look again every half second to include them.
        done, _ = await asyncio.wait(set(workers), timeout=0.5, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            workers.discard(task)
            exc = task.exception()
            if exc is not None and failure is None:
                failure = exc
                run.stop = True  # the others finish the batch they hold, then stop
    if failure is not None:
        raise failure


async def _account_for_the_rest(
    conn: LiveConnection, src: EntityPath, dst: EntityPath | None, run: Run, since: dt.datetime
) -> None:
    """One ``left`` outcome for each message still there that the run was asked to take."""
    report, selection = run.report, run.selection
    if selection is not None and not selection.count:
        return  # nothing was selected: nothing the run was asked to take can be left
    # Locked by another receiver (a run that was killed holds its locks until they expire), or
    # new: not moved by this run, and the report must not look complete. Each is a `left` outcome,
    # read from the broker; what this run reported already (held back, or copied and not completed)
    # and what `where` does not select are passed over.
    await account_for_what_is_left(
        conn,
        src,
        report,
        asked=("active",),
        since=since,
        again="resubmit again with resume=True" if run.braked else "run it again",
        verb="resubmit" if dst is not None else "discard",
        unexplained="not taken: the brake stopped the run" if run.braked else None,
        skip={seq_of(b.messages[i]) for b, keep in run.held for i in keep} | set(run.copied),
        match=None if selection is None else functools.partial(selection.takes, src),
        # What was selected lies between its lowest and highest numbers (a window's: not the whole entity).
        numbers=(1, None) if selection is None else (selection.first, selection.last + 1),
        not_asked="not taken: a resubmit takes active messages (deferred ones: receive_deferred)",
        # What the run knows of them: its receives ended on one that got nothing. Why (held by
        # another receiver then, a slow delivery) the broker does not say.
        still_there=None
        if run.empty_wait is None
        else f"still there: the {report.operation} ended when its receive got nothing within {run.empty_wait:g} s",
    )


def _note_the_stop(run: Run, src: EntityPath, exc: Exception) -> None:
    """A failure after some messages moved: what happened to each is the answer, and the failure
    says where it stopped."""
    why = from_sdk(exc, entity=str(src)).message
    run.report.add(
        Outcome(None, None, "failed", f"stopped after {run.moved} messages: {why}; the rest were not touched")
    )
    run.report.note(f"stopped early: {why}")


def _brake(run: Run) -> None:
    run.stop = run.braked = True  # each worker ends the batch it holds; one waiting for tokens gives it back


def _say_interrupted(run: Run, src: EntityPath, dst: EntityPath | None) -> None:
    """The Report of an interrupted run: what it moved, and how to go on."""
    done = "resubmitted" if dst is not None else "discarded"
    again = "resubmit again with resume=True to move it" if dst is not None else "the same discard again removes it"
    mark_interrupted(
        run.report,
        f"stopped taking messages after {run.moved} were {done}; each batch in flight was finished or given back "
        f"whole; what is left is still in {src}: {again}",
    )


async def _wind_up(run: Run, workers: set[asyncio.Task[None]], started: float) -> None:
    """However the run ends: the workers ended (each after the batch it holds), the messages held
    back given back, the copies not completed reported as duplicated, the time taken. An interrupt
    meanwhile cannot cut this short (it would leave messages locked)."""
    run.stop = True  # no worker starts others from here on, nor takes another batch
    _, cut = await uninterrupted(_given_back(run, workers))
    run.interrupted = run.interrupted or cut
    run.report.extend(run.copied.values())
    run.report.elapsed = time.perf_counter() - started


async def _given_back(run: Run, workers: set[asyncio.Task[None]]) -> None:
    if workers:
        await asyncio.gather(*workers, return_exceptions=True)
    for batch, keep in run.held:
        await batch.release_async(keep)
        await batch.aclose()


async def moved(conn: LiveConnection, src: EntityPath, dst: EntityPath | None, **kwargs: Any) -> Report:
    """``_resubmit`` with the one "reconnect once, then retry" (safe: a failure with nothing moved
    changed nothing) and SDK errors turned into the kit's."""

    def noted(report: Report) -> None:
        report.note("reconnected: the connection had dropped (nothing had moved yet)")

    return await conn.call_on(src, conn.reconnecting(lambda: _resubmit(conn, src, dst, **kwargs), after=noted))


def check_limit(limit: int | None, max_in_flight: int, batch_size: int) -> None:
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise InvalidInputError("max_messages must be a positive whole number.")
    check_max_in_flight(max_in_flight)  # batches on their way at once (receive, send the copies, complete)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInputError(f"batch_size must be a positive whole number, not {batch_size!r}.")


def _target(src: EntityPath, target: str | EntityPath | None, allow_fan_out: bool) -> EntityPath:
    dst = EntityPath.parse(target) if target is not None else default_target(src)
    if src.is_subscription and dst.name.lower() == src.name.lower() and not allow_fan_out:
        raise _fan_out_refused(src)
    return dst


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
    stop_if_dead_letters: int | None = None,
    stop_if_active: int | None = None,
    watch: str | Sequence[str] | None = None,
    watch_interval: float = WATCH_INTERVAL,
    canary: int | None = None,
    canary_timeout: float = CANARY_TIMEOUT,
    connection: ConnectionLike = None,
) -> Report:
    """The async form of :func:`resubmit`. ``resume=True`` continues a run that did not finish
    (interrupted): ``max_messages`` counts what it moved (see the module docstring)."""
    src = EntityPath.parse(source)
    dst = _target(src, target, allow_fan_out)
    check_limit(max_messages, max_in_flight, batch_size)
    per_second = parse_rate(rate)
    brake = brake_of(stop_if_dead_letters, stop_if_active, watch, watch_interval)
    check_canary(canary, canary_timeout)
    matches = as_where(where)  # a bad expression fails before anything is received
    window = enqueued_window(enqueued_after, enqueued_before)
    conn = live(connection)
    record = record_path(conn, src, dst)
    earlier = load(record)  # resumed or not, the copies it records are not sent again
    if resume and earlier is None:
        raise InvalidInputError(
            f"Nothing to resume: no resubmit from {src} to {dst} was left unfinished (the last one finished)."
        )
    before = earlier.moved if resume and earlier is not None else None
    limit = None if max_messages is None else max_messages - (before or 0)
    limit = canary if canary is not None and (limit is None or canary < limit) else limit
    if limit is not None and limit < 1:  # the run moved what it was asked to: nothing more, its record done with
        save(record, earlier if earlier is not None and earlier.copied else None)
        return Report("resubmit", str(src), str(dst), notes=[f"resumed: the {max_messages} asked for were moved"])
    with operation("resubmit", conn, dst, source=src) as span:
        report = await moved(
            conn,
            src,
            dst,
            window=window,
            where=matches,
            edit=edit,
            limit=limit,
            keep_message_id=keep_message_id,
            max_in_flight=max_in_flight,
            batch_size=batch_size,
            progress=progress,
            earlier=earlier,
            record=record,
            before=before,
            rate=per_second,
            brake=brake,
            paused=canary is not None,
        )
        span.report(report)
    if canary is not None and not core_interrupted(report):  # the copies' fate, read at the target
        entities = await asyncio.to_thread(watched_entities, conn, brake or Brake(watch=watched(watch)), dst)
        await fate(conn, entities, report, interval=watch_interval, timeout=canary_timeout)
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


@renamed(limit="max_messages")
@sync_form(aresubmit)
def resubmit(
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
    stop_if_dead_letters: int | None = None,
    stop_if_active: int | None = None,
    watch: str | Sequence[str] | None = None,
    watch_interval: float = WATCH_INTERVAL,
    canary: int | None = None,
    canary_timeout: float = CANARY_TIMEOUT,
    connection: ConnectionLike = None,
) -> Report:
    """Move messages from ``source`` to ``target``: copy first, complete second.

    ``where`` selects messages (a search expression, see ``compile_where``, or a function of a
    record; others are released untouched; one that raised on every message fails before anything
    moves, on some they are counted in the Report's stats and notes); ``enqueued_after`` /
    ``enqueued_before`` (a datetime, ISO 8601, or an age such as ``2h``) only messages enqueued within
    that window; ``edit(record)`` returns the
    record to send (its ``body``/``body_text``/properties changed) or None to leave the message where
    it is. One outcome per message: resubmitted, skipped, duplicated or failed. ``progress(report)``
    after each batch (from the connection's thread). Interrupted, it ends the batches in flight (none
    cut in two) and returns its Report (``core.interrupted(report)`` is True); ``resume=True``
    continues that run, nothing moved twice (``max_messages`` counts over the whole run; see the
    module docstring). ``rate`` (``50/s``, ``3000/m``: ``core.parse_rate``) holds the run to that
    many messages per second, ``max_in_flight`` still the cap on batches on their way. The brake
    (``brake.py``): ``stop_if_dead_letters=N`` stops the run once N more messages are in the watched
    dead-letter queues than when it began, ``stop_if_active=N`` once a watched backlog passes N;
    ``watch`` the entities (default: the target; a topic: its subscriptions), read every
    ``watch_interval`` seconds. Stopped so, its Report says why, what moved and what came back, and
    ``resume=True`` moves the rest. ``canary=K`` moves K, waits until the target's consumer has had
    them (none still active there, or ``canary_timeout`` seconds), says what became of them
    (``report.stats["canary"]``, read from the broker: ``canary.py``) and moves nothing more until
    the same call with ``resume=True``."""
    raise NotImplementedError  # never runs: @sync_form runs aresubmit
