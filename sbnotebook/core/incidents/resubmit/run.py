"""One resubmit run (a discard's and a purge window's too): the selection made, up to
``max_in_flight`` workers started and ended (``resubmit/workers.py``), the brake watching beside them,
what is left accounted for, and its Report, interrupted or not (``api.py`` says what a run
guarantees; its record: ``resubmit/progress.py``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Concatenate, ParamSpec

from ...connections.interrupts import answers_interrupts, mark_interrupted, taken_back, uninterrupted
from ...connections.live import LiveConnection
from ...defaults import check_max_in_flight, check_whole_number
from ...entities import EntityPath
from ...operations.bounds import TimeWindow
from ...operations.scan import anything_there
from ...outcome import Outcome, Report
from ...rates import TokenBucket
from ...sdk.failures import from_sdk
from ..brake import Brake, Watch
from ..brake import started as watch_started
from ..leftovers import account_for_what_is_left
from .progress import ResubmitProgress, save
from .selection import Selection, peeked_selection
from .workers import Job, Run, seq_of, worker

log = logging.getLogger(__name__)
P = ParamSpec("P")
Record = dict[str, Any]

BATCH_SIZE = 50  # messages per batch


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
    on_outcome: Callable[[Outcome], None] | None = None,
) -> Report:
    """Copy first (send), complete second (one request per batch), with up to ``max_in_flight``
    batches moved at once (each worker: send the copies, complete the originals, receiving its next
    batch meanwhile), so a batch costs about two round trips and ``max_in_flight`` of them overlap. Interrupted,
    it takes no more messages, ends the batches in flight and returns its Report (``api.py``'s
    docstring). ``earlier``: the record of the runs before (its copies are not sent again), kept
    up to date in ``record``; ``before``: the messages they moved (a resumed run; None: not resumed);
    ``brake``: what stops the run on its own (brake.py), read first before anything moves."""
    answers_interrupts()
    watch = None if brake is None or dst is None else await watch_started(conn, brake, dst)
    started = time.perf_counter()
    report = Report("resubmit" if dst is not None else "discard", str(src), str(dst) if dst else None)
    report.listener = on_outcome  # told of every outcome, past the Report's detail limit too
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
        still_there=None if run.empty_wait is None else f"still there: the {report.operation} ended when {_empty(run)}",
    )


def _empty(run: Run) -> str:
    """How the receive that ended the run got nothing: within its wait, or none there (a drain)."""
    if run.empty_wait:
        return f"its receive got nothing within {run.empty_wait:g} s"
    return "its receive found none there (Service Bus had none to send it)"


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


Moving = Callable[Concatenate[LiveConnection, EntityPath, P], Coroutine[Any, Any, Report]]


def _reconnected_once(run: Moving[P]) -> Moving[P]:
    """``run`` (its first two arguments the connection and the source) with the one "reconnect once,
    then retry" (safe: a failure with nothing moved changed nothing) and SDK errors turned into the
    kit's; its typed signature kept (mypy checks each caller's keywords against ``_resubmit``'s)."""

    def noted(report: Report) -> None:
        report.note("reconnected: the connection had dropped (nothing had moved yet)")

    @functools.wraps(run)
    async def call(conn: LiveConnection, src: EntityPath, /, *args: P.args, **kwargs: P.kwargs) -> Report:
        return await conn.call_on(src, conn.reconnecting(lambda: run(conn, src, *args, **kwargs), after=noted))

    return call


moved = _reconnected_once(_resubmit)


def check_limit(limit: int | None, max_in_flight: int, batch_size: int) -> None:
    if limit is not None:
        check_whole_number(limit, "max_messages")
    check_max_in_flight(max_in_flight)  # batches moved at once (send the copies, complete)
    check_whole_number(batch_size, "batch_size")
