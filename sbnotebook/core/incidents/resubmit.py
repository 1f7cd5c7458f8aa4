"""Moving messages (typically out of a dead-letter queue) without ever losing one.

For each message: the copy is sent and confirmed first, the original completed second
(``copies.acopy_then_complete``, which also says what the copy keeps). A crash in between leaves a
duplicate, never a gap. Messages a filter does not select are released (given back without raising
their delivery count), not abandoned.

Bulk work (10^6 messages) streams: up to ``max_in_flight`` batches are on their way at once (receive,
send the copies, complete the originals), nothing is kept per moved message (the Report counts past
its detail limit), and ``progress(report)`` is called after each batch. Interrupted (a kernel
interrupt, the process killed), the same call run again finishes what is left: the originals not
completed are still there, and the copies already sent carry the same message id again (``copy_id``,
or the original's with ``keep_message_id``), so a target with duplicate detection drops them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..connections.live import LiveConnection
from ..connections.loop import stop_if_cancelled
from ..connections.registry import ConnectionLike, live
from ..connections.syncforms import sync_form
from ..defaults import MAX_IN_FLIGHT, check_max_in_flight
from ..entities import EntityPath
from ..errors import EntityNameError, InvalidInputError
from ..operations.batch import LockedBatch
from ..operations.bounds import TimeWindow
from ..operations.copies import acopy_then_complete, copy_for
from ..operations.messages import message_id
from ..operations.receive import receive_batch
from ..operations.scan import anything_there
from ..operations.window import When, enqueued_window
from ..outcome import Outcome, Report
from ..renames import renamed
from ..sdk.failures import from_sdk
from ..views.search import WhereLike, as_where
from .leftovers import account_for_what_is_left
from .selection import Selection, peeked_selection

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


@dataclass
class _Run:
    """What the workers of one resubmit share. Memory is bounded by what is in flight, the messages
    held back (not selected, or left by the edit) and the problems: nothing grows per moved message."""

    report: Report
    limit: int | None
    selection: Selection | None
    progress: Callable[[Report], None] | None
    claimed: int = 0  # messages asked for by receives in flight or done (the limit counts these)
    moved: int = 0
    stop: bool = False
    workers: int = 0
    # Copied but not completed (lock lost): reported as duplicated at the end unless it comes back
    # in this run and is completed then. Only problems are kept here, never every message.
    copied: dict[int, Outcome] = field(default_factory=dict)
    held: list[tuple[LockedBatch, list[int]]] = field(default_factory=list)  # given back at the end
    # The wait of the latest receive that got nothing (it ended its worker); None: none did.
    empty_wait: float | None = None

    def want(self, batch_size: int) -> int:
        if self.limit is None:
            return batch_size
        return max(0, min(batch_size, self.limit - self.claimed))

    def tick(self) -> None:
        if self.progress is not None:
            self.progress(self.report)


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
) -> Report:
    """Copy first (send), complete second (one request per batch), with up to ``max_in_flight``
    batches on their way at once (each worker: receive, send the copies, complete the originals),
    so a batch costs about three round trips and ``max_in_flight`` of them overlap."""
    started = time.perf_counter()
    since = dt.datetime.now(dt.UTC)
    report = Report("resubmit" if dst is not None else "discard", str(src), str(dst) if dst else None)
    report.stats.update(batches=0, workers=0)
    selected = where is not None or window is not None
    selection = await peeked_selection(conn, src, where, limit, window) if selected else None
    _say_unevaluated(report, selection)
    # With a selection the limit is on the selected messages (it ends the selection), not on the
    # messages received on the way past unselected ones.
    run = _Run(report, limit if selection is None else None, selection, progress)
    workers: set[asyncio.Task[None]] = set()

    def start_worker(first: bool) -> None:
        run.workers += 1
        report.stats["workers"] = max(report.stats["workers"], run.workers)
        task = asyncio.create_task(
            _worker(conn, src, dst, run, edit, keep_message_id, batch_size, start_worker, max_in_flight, first)
        )
        workers.add(task)

    try:
        if selection is None or selection.count:
            start_worker(True)
        await _until_all_ended(workers, run)
        if (limit is None or run.moved < limit) and await anything_there(conn, src):
            await _account_for_the_rest(conn, src, dst, run, since)
    except Exception as exc:
        if not run.moved and not run.copied:
            raise  # nothing moved: the caller may reconnect and start again
        _note_the_stop(run, src, exc)
    finally:
        await _wind_up(run, workers, started)
    return report


def _say_unevaluated(report: Report, selection: Selection | None) -> None:
    """What the where could not evaluate when the selection was made: the Report's stats and a note."""
    if selection is not None and selection.unevaluated_text is not None:
        report.stats.update(selection.unevaluated)
        report.note(f"{selection.unevaluated_text}: not taken")


async def _until_all_ended(workers: set[asyncio.Task[None]], run: _Run) -> None:
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
    conn: LiveConnection, src: EntityPath, dst: EntityPath | None, run: _Run, since: dt.datetime
) -> None:
    """One ``left`` outcome for each message still there that the run was asked to take."""
    report, selection = run.report, run.selection
    if selection is not None and not selection.count:
        return  # nothing was selected: nothing the run was asked to take can be left
    # Locked by another receiver (a run that was interrupted holds its locks until they expire), or
    # new: not moved by this run, and the report must not look complete. Each is a `left` outcome,
    # read from the broker; what this run reported already (held back, or copied and not completed)
    # and what `where` does not select are passed over.
    await account_for_what_is_left(
        conn,
        src,
        report,
        asked=("active",),
        since=since,
        again="run it again",
        verb="resubmit" if dst is not None else "discard",
        skip={_seq(b.messages[i]) for b, keep in run.held for i in keep} | set(run.copied),
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


def _note_the_stop(run: _Run, src: EntityPath, exc: Exception) -> None:
    """A failure after some messages moved: what happened to each is the answer, and the failure
    says where it stopped."""
    why = from_sdk(exc, entity=str(src)).message
    run.report.add(
        Outcome(None, None, "failed", f"stopped after {run.moved} messages: {why}; the rest were not touched")
    )
    run.report.note(f"stopped early: {why}")


async def _wind_up(run: _Run, workers: set[asyncio.Task[None]], started: float) -> None:
    """However the run ends: the workers stopped, the messages held back given back, the copies
    not completed reported as duplicated, the time taken."""
    run.stop = True  # no worker starts others from here on
    for task in workers:  # cancelled (an interrupted cell): each gives back what it holds
        task.cancel()
    if workers:
        await asyncio.gather(*workers, return_exceptions=True)
    for batch, keep in run.held:
        await batch.release_async(keep)
        await batch.aclose()
    run.report.extend(run.copied.values())
    run.report.elapsed = time.perf_counter() - started


async def _worker(
    conn: LiveConnection,
    src: EntityPath,
    dst: EntityPath | None,
    run: _Run,
    edit: Callable[[Record], Record | None] | None,
    keep_message_id: bool,
    batch_size: int,
    start_worker: Callable[[bool], None],
    max_workers: int,
    first: bool,
) -> None:
    """Receive a batch, send its copies, complete its originals; again until the source is empty.
    The first worker's first batch full means more is waiting: the other workers start."""
    wait = 2.0 if first else 0.5  # the first messages may take a moment; later, what is there now
    # (`first` stays true until this worker's first full batch has started the others)
    try:
        while not run.stop:
            stop_if_cancelled()
            if run.selection is not None and run.selection.done():
                return  # every selected message has been handled: stop locking others
            want = run.want(batch_size)
            if want == 0:
                return
            run.claimed += want
            # Peek-lock, locks renewed while the batch is held, settled one request at a time.
            batch = await receive_batch(conn, src, count=want, wait=wait, max_in_flight=1)
            run.claimed -= want - len(batch.messages)
            batch_wait, wait = wait, 0.5
            if not batch.messages:
                run.empty_wait = batch_wait
                await batch.aclose()
                return
            if first and len(batch.messages) == want and not run.stop:
                first = False
                # A full first batch: more is waiting. The others start at once (each opens its
                # links, about half a second, all in parallel rather than one after the other).
                for _ in range(max_workers - run.workers):
                    start_worker(False)
            try:
                stop_if_cancelled()  # cancelled during the receive: the batch goes back below
                keep = await _move(src, dst, run, batch, edit, keep_message_id)
            except BaseException:
                # Stopped in the middle (cancelled, connection gone): the locks go back without a
                # delivery counted; a copy already sent is kept in mind by run.copied.
                await asyncio.shield(_give_back(batch, batch.unsettled))
                raise
            run.report.stats["batches"] += 1
            if keep:
                run.held.append((batch, keep))  # stays locked so the next receive moves past it
            else:
                await batch.aclose()
            run.tick()
            if run.selection is not None and min(_seq(m) for m in batch.messages) > run.selection.last:
                run.stop = True  # past the last selected message: nothing more to find
    finally:
        run.workers -= 1


async def _give_back(batch: LockedBatch, indexes: list[int]) -> None:
    try:
        await batch.release_async(indexes)
    finally:
        await batch.aclose()


def _seq(msg: Any) -> int:
    return int(msg.sequence_number or 0)


async def _move(
    src: EntityPath,
    dst: EntityPath | None,
    run: _Run,
    batch: LockedBatch,
    edit: Callable[[Record], Record | None] | None,
    keep_message_id: bool,
) -> list[int]:
    """One batch: copies sent, then the originals completed. Returns the rows held back."""
    report = run.report
    keep: list[int] = []
    todo: list[int] = []  # completed without a copy: discarded, or copied earlier in this run
    copies: list[tuple[int, Any]] = []
    for i, m in enumerate(batch.messages):
        seq = _seq(m)
        if run.selection is not None and seq not in run.copied:
            if not run.selection.takes(src, m):
                keep.append(i)
                report.add(Outcome(message_id(m), seq, "skipped", "not selected"))
                continue
            run.selection.found += 1
        if seq in run.copied or dst is None:
            todo.append(i)
            continue
        copy = copy_for(m, str(src), edit, keep_message_id)
        if copy is None:
            keep.append(i)  # the edit said: leave it where it is
            report.add(Outcome(message_id(m), seq, "skipped", "the edit returned None"))
            continue
        copies.append((i, copy))
    if dst is None:
        settled = await batch.settle_async("complete", todo)
    else:
        settled = await acopy_then_complete(batch, copies, dst, also_complete=todo)
    done = "resubmitted" if dst is not None else "discarded"
    for o in settled.every():
        seq = int(o.sequence_number or 0)
        if o.outcome == "completed":
            run.copied.pop(seq, None)
            report.add(Outcome(o.message_id, seq, done))
            run.moved += 1
        elif o.outcome == "duplicated":
            run.copied[seq] = replace(o, index=None)  # reported at the end unless completed later in this run
        elif dst is not None and o.index is not None:  # the copy was not confirmed: the original stays
            keep.append(o.index)  # held back, not retried in this run
            report.add(replace(o, index=None))
        else:
            report.add(Outcome(o.message_id, seq, "failed", o.error))
    for n in settled.notes:
        report.note(n)
    return keep


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
    batch_size: int = BATCH_SIZE,
    progress: Callable[[Report], None] | None = None,
    enqueued_after: When | None = None,
    enqueued_before: When | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """The async form of :func:`resubmit`."""
    src = EntityPath.parse(source)
    dst = _target(src, target, allow_fan_out)
    check_limit(max_messages, max_in_flight, batch_size)
    matches = as_where(where)  # a bad expression fails before anything is received
    window = enqueued_window(enqueued_after, enqueued_before)
    conn = live(connection)
    return await moved(
        conn,
        src,
        dst,
        window=window,
        where=matches,
        edit=edit,
        limit=max_messages,
        keep_message_id=keep_message_id,
        max_in_flight=max_in_flight,
        batch_size=batch_size,
        progress=progress,
    )


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
    batch_size: int = BATCH_SIZE,
    progress: Callable[[Report], None] | None = None,
    enqueued_after: When | None = None,
    enqueued_before: When | None = None,
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
    after each batch (from the connection's thread). Run again after an interruption, it finishes
    what is left (see the module docstring)."""
    raise NotImplementedError  # never runs: @sync_form runs aresubmit
