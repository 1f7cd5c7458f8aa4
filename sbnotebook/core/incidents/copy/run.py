"""One run of a copy (``copying.acopy``): the source peeked ahead (``copy_peeks.PeekAhead``, within
``max_held_bytes``), each message made into a copy for the send pipeline (``pipeline.send_all``) on
the target's connection, each outcome followed into the progress; the brake watching the target
beside it (``brake.py``); and the run's Report, its record saved or removed (``finished``).

A stop (an interrupt, the brake) takes no more messages from the source: the copies already handed
to the pipeline are sent and confirmed, and the record says where the next run starts.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

from ...connections.interrupts import answers_interrupts, mark_interrupted, report_of, taken_back
from ...connections.live import LiveConnection
from ...defaults import MAX_HELD_BYTES
from ...entities import EntityPath
from ...operations.copies import copy_message
from ...operations.messages import name_id
from ...operations.pipeline import FLUSH, RetryPolicy, send_all
from ...operations.window import Span
from ...outcome import Outcome, Report
from ...views.records import to_record
from ..brake import Brake, Watch
from ..brake import started as watch_started
from .read_ahead import PeekAhead, held_size
from .start import Start


class CopyRun:
    """One run of a copy: the source peeked ahead (``peeks``, at most ``max_held_bytes`` of source
    messages in memory), each answer made into copies for the send pipeline (``copies``), each
    outcome followed into the progress (``counted``, which gives its message's room back)."""

    def __init__(
        self,
        src: LiveConnection,
        src_path: EntityPath,
        start: Start,
        *,
        matches: Callable[[dict[str, Any]], bool] | None,
        keep_message_id: bool,
        max_messages: int | None,
        span: Span | bool | None = False,
        max_held_bytes: int = MAX_HELD_BYTES,
        canary: int | None = None,
    ) -> None:
        self.name = str(src_path)
        self.start, self.state, self.tracker = start, start.state, start.tracker
        self.matches, self.keep_message_id = matches, keep_message_id
        self.seed = uuid.UUID(self.state.seed)
        self.before = self.state.copied
        self.left = None if max_messages is None else max(max_messages - self.state.copied, 0)
        # A canary: K copied, the rest to come (the record stays; max_messages, which keys it, unchanged).
        self.paused = canary is not None and (self.left is None or canary < self.left)
        self.left = canary if self.paused else self.left
        first = min(self.state.failed) if self.state.failed else self.state.done + 1
        self.peeks = PeekAhead(src, src_path, first, span, self.left, max_held_bytes)
        self.rate: float | None = None  # messages per second (``acopy(rate=)``), None: as fast as the sends go
        self.release = self.peeks.release
        self.sizes: dict[int, int] = {}  # each copy in the pipeline (by its index): its original's held size
        self.interrupted = False  # stopped by an interrupt, the copies in flight confirmed
        self.brake: Brake | None = None  # what stops the run on its own (brake.py), watched beside it
        self.watch: Watch | None = None
        self.stop = False  # braked: no more messages taken from the source

    @property
    def braked(self) -> bool:
        return self.watch is not None and self.watch.why is not None

    def stopped(self) -> None:
        self.stop = True  # the brake fired: the copies handed to the pipeline go, no more are made

    def counted(self, o: Outcome) -> None:
        """A send outcome: its source message leaves memory, the progress follows it."""
        if o.index is not None:
            self.release(self.sizes.pop(o.index, 0))
        self.tracker.outcome(o)
        self.state.copied = self.before + self.tracker.confirmed

    def skipped(self, msg: Any, seq: int) -> bool:
        """Copied by an earlier run (and not failed then), or not selected by ``where``."""
        return (seq <= self.state.done and seq not in self.state.failed) or (
            self.matches is not None and not self.matches(to_record(msg, self.name))
        )

    async def copies(self) -> AsyncGenerator[Any, None]:
        """The copies to send, page by page as the reader brings them (it starts with the first and
        stops with the last), at most ``max_messages``; a ``FLUSH`` at each page's end (a page's
        copies in as few sends as fit: far from the namespace the sends in flight are the limit)."""
        taken = 0
        reader = asyncio.ensure_future(self.peeks.read())
        try:
            while self.left is None or taken < self.left:
                page = await self.peeks.pages.get()
                if page is None:
                    self.tracker.exhausted = True
                    return
                if isinstance(page, BaseException):
                    raise page
                page.reverse()
                while page:
                    if self.stop:  # braked: this page, and any after it, left for the next run
                        self.release(sum(held_size(m) for m in page), len(page))
                        return
                    msg = page.pop()  # the page holds only what is not copied yet
                    seq = int(msg.sequence_number or 0)
                    if self.skipped(msg, seq):
                        self.release(held_size(msg))
                        continue
                    if self.left is not None and taken >= self.left:
                        self.release(sum(held_size(m) for m in (msg, *page)), 1 + len(page))
                        return
                    if not taken:
                        await self.start.saved()
                    self.sizes[taken] = held_size(msg)  # the pipeline numbers the copies as they come
                    taken += 1
                    self.tracker.taken(seq)
                    copied = copy_message(
                        msg,
                        keep_message_id=self.keep_message_id,
                        message_id=name_id(self.seed, str(seq)),
                        resubmission=False,
                    )
                    del msg
                    yield copied
                yield FLUSH  # the page's copies go now: their confirmations make room for the next peeks
        finally:
            reader.cancel()  # done, stopped or interrupted: no more peeks
            await asyncio.gather(reader, return_exceptions=True)


async def send_copies(
    run: CopyRun,
    dst: LiveConnection,
    dst_path: EntityPath,
    max_in_flight: int,
    progress: Callable[[Report], None] | None,
) -> Report:
    """The run's copies through the send pipeline on the target's connection. Refused before
    anything was taken, the record is removed; interrupted, it is saved for the next run, and the
    copies in flight confirmed first: the Report says what was copied (``connections/interrupts.py``).
    The pipeline answers the interrupt itself, on the target's loop: an ``acopy`` awaited on another
    loop (a notebook's) and cancelled gets that answer too."""

    async def answered() -> Report:
        answers_interrupts()
        # The brake's first reading before anything is copied, then one every interval beside the run.
        run.watch = None if run.brake is None else await watch_started(dst, run.brake, dst_path)
        watching = None if run.watch is None else asyncio.create_task(run.watch.watch(run.stopped))
        try:
            report = await copied()
        finally:
            if watching is not None:
                watching.cancel()
                await asyncio.gather(watching, return_exceptions=True)
        if run.braked and not run.interrupted and run.watch is not None:
            await run.watch.said(report, run.state.copied - run.before, run.name, copied=True)
        elif run.watch is not None and not run.interrupted:
            await run.watch.counted(report)  # what came back while it ran, though not enough to stop it
        return report

    async def copied() -> Report:
        # Made, read and closed on the target's loop (its reader's tasks are there); an interrupt
        # closes the scan on the source at once.
        async with aclosing(run.copies()) as messages:
            try:
                return await send_all(
                    dst,
                    dst_path,
                    messages,
                    max_in_flight=max_in_flight,
                    rate=run.rate,
                    batch=True,
                    retry=RetryPolicy(),
                    progress=progress,
                    schedule_at=None,
                    on_outcome=run.counted,
                )
            except asyncio.CancelledError as stop:
                done = report_of(stop)
                if done is None:
                    raise  # cancelled before the pipeline took it: as before
                taken_back()  # answered with the Report: saved and said by finished
                run.interrupted = True
                return done

    try:
        return await dst.call(answered())
    except BaseException:
        record, tracker = run.start.record, run.tracker
        if record is not None and not run.state.pending and tracker.base == 0 and not tracker.lines:
            record.unlink(missing_ok=True)  # refused before anything was taken (no such target, ...)
        else:
            tracker.save()  # interrupted: the next run (this kernel's or another's) starts here
        raise


def finished(report: Report, run: CopyRun, dst_path: EntityPath) -> Report:
    """The report of a run that ended, named a copy, with its notes (resumed, a record set aside,
    what is left); the record saved, or removed once the copy is complete."""
    state, tracker, record = run.state, run.tracker, run.start.record
    tracker.save()
    report.operation, report.entity, report.target = "copy", run.name, str(dst_path)
    report.stats["peak_held"], report.stats["peak_held_bytes"] = run.peeks.peak_count, run.peeks.peak
    if run.before:
        report.note(f"resumed: {run.before} copied before")
    if run.start.set_aside is not None:
        report.note(run.start.set_aside)
    exhausted_limit = run.left is not None and state.copied - run.before >= run.left
    if not state.failed and not tracker.lines and (tracker.exhausted or (exhausted_limit and not run.paused)):
        state.complete = True
        if record is not None:
            record.unlink(missing_ok=True)
    else:
        failed = sum(1 for o in report.failures if o.index is not None)
        if run.interrupted:
            mark_interrupted(
                report,
                f"stopped taking messages after {state.copied - run.before} were copied (each copy in flight confirmed "
                "first); the same copy again copies what is left",
            )
        if tracker.exhausted or (exhausted_limit and not run.paused):
            report.note(f"{failed} messages not copied: the same copy again copies what is left")
        elif not run.braked and not run.paused:  # the brake and a canary say so themselves
            # stopped part-way: what follows in the source was not read, so it is not counted here
            report.note(
                f"{failed} messages not copied, and the copy stopped before the end of {run.name} (the messages"
                " after them were not read): the same copy again copies what is left"
            )
    return report
