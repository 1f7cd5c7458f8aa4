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
this module has the copy, and which record a copy's arguments name (``copy_record``,
``copy_resume_point``). The copy's parts: ``_start`` (the progress a run resumes), ``_CopyRun`` (peek
ahead, copy, follow each outcome, within ``max_held_bytes``), ``_send`` (the send pipeline, the record kept if
interrupted) and ``_finish`` (the report's notes, the record removed once complete).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..connections.interrupts import (
    answers_interrupts,
    before_anything,
    mark_interrupted,
    report_of,
    taken_back,
)
from ..connections.live import LiveConnection
from ..connections.registry import ConnectionLike, live
from ..connections.syncforms import arguments_of, sync_form
from ..defaults import MAX_HELD_BYTES, MAX_IN_FLIGHT, check_max_in_flight
from ..entities import EntityPath
from ..errors import InvalidInputError
from ..operations.copies import copy_message
from ..operations.messages import name_id
from ..operations.pipeline import FLUSH, RetryPolicy, send_all
from ..operations.scan import PAGE_SIZE
from ..operations.window import Span, When, enqueued_window, given_text, locate
from ..outcome import Outcome, Report
from ..rates import Rate, parse_rate
from ..renames import renamed
from ..tracing import operation
from ..views.records import to_record
from ..views.search import WhereLike, as_where
from .copy_peeks import PeekAhead, held_size
from .copy_progress import CopyProgress, Record, created_times, load, record_key, record_path
from .resumable import LineTracker

log = logging.getLogger(__name__)

# Copies sent in batches of at most this many, as the page is read: a copy leaves before the rest
# of its page is copied (~0.5 ms a message), so less is held for the same speed (docs/benchmarks.md).
SEND_EVERY = PAGE_SIZE // 5


def copy_target(target: str | EntityPath) -> EntityPath:
    """A copy goes to a queue or a topic: a subscription or a dead-letter queue cannot be sent to."""
    path = EntityPath.parse(target)
    if path.is_subscription or path.is_dead_letter:
        raise InvalidInputError(
            f"Copies go to a queue or a topic, not to {path}: Service Bus takes no messages sent to a "
            f"subscription or a dead-letter queue (copy to the topic {path.name}, or to a queue)."
        )
    return path


@dataclass
class _Start:
    """Where a run of a copy starts: its progress, the tracker that follows each outcome back to its
    source sequence number, and the record on disk (None: none is kept, as with ``state=`` or a
    ``where`` function); ``set_aside``: why a record found was not resumed, for the report."""

    state: CopyProgress
    tracker: LineTracker
    record: Path | None = None
    set_aside: str | None = None
    # A fresh record's creation times, asked for while the first peek is on its way (one round trip
    # sooner); the record is saved with them before the first send (``saved``).
    created: asyncio.Future[dict[str, str | None]] | None = None

    async def saved(self) -> None:
        """Before the first send: the record on disk, so a run after a kill finds the same seed."""
        if self.created is not None:
            record: Any = self.tracker.state  # the Record the tracker saves
            record.created, self.created = await self.created, None
            self.tracker.save()


async def _start(
    src: LiveConnection,
    src_path: EntityPath,
    dst: LiveConnection,
    dst_path: EntityPath,
    where: WhereLike,
    keep_message_id: bool,
    max_messages: int | None,
    state: CopyProgress | None,
    resume: bool,
    window: tuple[str | None, str | None] = (None, None),
) -> _Start:
    """The progress a copy resumes: ``state`` if given, else its record on disk (unless ``resume`` is
    False, or the record was set aside), else a fresh one; a record is saved before the first send."""
    if state is not None or callable(where):
        if state is None:
            log.info("copy of %s: a function as where keeps no record on disk (resumed only with state=)", src_path)
            state = CopyProgress(str(src_path), str(dst_path))
        state.complete = False
        return _Start(state, LineTracker(state, None))
    key = record_key(src, src_path, dst, dst_path, where, keep_message_id, max_messages, window)
    record = record_path(key)
    asked = asyncio.ensure_future(asyncio.to_thread(created_times, src, src_path, dst, dst_path))
    found, set_aside = (None, None)
    if resume and record.is_file():  # a record to check against the entities' creation times first
        found, set_aside = load(record, await asked)
    state = found if found is not None and found.pending else CopyProgress(str(src_path), str(dst_path))
    state.complete = False
    saved: Any = Record(state, key, {})  # a Resumable, but its failed is read-only (mypy's protocols)
    tracker = LineTracker(saved, record)
    saved.tracker = tracker
    record.parent.mkdir(parents=True, exist_ok=True)
    return _Start(state, tracker, record, set_aside, created=asked)  # saved before the first send


class _CopyRun:
    """One run of a copy: the source peeked ahead (``peeks``, at most ``max_held_bytes`` of source
    messages in memory), each answer made into copies for the send pipeline (``copies``), each
    outcome followed into the progress (``counted``, which gives its message's room back)."""

    def __init__(
        self,
        src: LiveConnection,
        src_path: EntityPath,
        start: _Start,
        *,
        matches: Callable[[dict[str, Any]], bool] | None,
        keep_message_id: bool,
        max_messages: int | None,
        span: Span | bool | None = False,
        max_held_bytes: int = MAX_HELD_BYTES,
    ) -> None:
        self.name = str(src_path)
        self.start, self.state, self.tracker = start, start.state, start.tracker
        self.matches, self.keep_message_id = matches, keep_message_id
        self.seed = uuid.UUID(self.state.seed)
        self.before = self.state.copied
        self.left = None if max_messages is None else max(max_messages - self.state.copied, 0)
        first = min(self.state.failed) if self.state.failed else self.state.done + 1
        self.peeks = PeekAhead(src, src_path, first, span, self.left, max_held_bytes)
        self.rate: float | None = None  # messages per second (``acopy(rate=)``), None: as fast as the sends go
        self.release = self.peeks.release
        self.sizes: dict[int, int] = {}  # each copy in the pipeline (by its index): its original's held size
        self.interrupted = False  # stopped by an interrupt, the copies in flight confirmed

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
        stops with the last), at most ``max_messages``; a ``FLUSH`` every ``SEND_EVERY`` copies and
        at each page's end."""
        taken = batched = 0
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
                    batched += 1
                    if batched % SEND_EVERY == 0:
                        yield FLUSH  # send these now, while the rest of the page is copied
                yield FLUSH  # the page's copies go now: their confirmations make room for the next peeks
        finally:
            reader.cancel()  # done, stopped or interrupted: no more peeks
            await asyncio.gather(reader, return_exceptions=True)


async def _send(
    run: _CopyRun,
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
                taken_back()  # answered with the Report: saved and said by _finish
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


def _finish(report: Report, run: _CopyRun, dst_path: EntityPath) -> Report:
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
    if not state.failed and not tracker.lines and (tracker.exhausted or exhausted_limit):
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
        if tracker.exhausted or exhausted_limit:
            report.note(f"{failed} messages not copied: the same copy again copies what is left")
        else:  # stopped part-way: what follows in the source was not read, so it is not counted here
            report.note(
                f"{failed} messages not copied, and the copy stopped before the end of {run.name} (the messages"
                " after them were not read): the same copy again copies what is left"
            )
    return report


# Old keywords (docs/names.md), kept for one release: each says once what replaced it.
COPY_RENAMED = {"limit": "max_messages", "keep_ids": "keep_message_id", "concurrency": "max_in_flight"}


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
    and a note say how many."""
    src_path = EntityPath.parse(source)
    dst_path = copy_target(target)
    if max_messages is not None and (not isinstance(max_messages, int) or max_messages < 1):
        raise InvalidInputError(f"max_messages must be a positive whole number, not {max_messages!r}.")
    check_max_in_flight(max_in_flight)
    per_second = parse_rate(rate)
    check_max_in_flight(max_held_bytes, "max_held_bytes")  # a whole number of 1 or more, the same check
    matches = as_where(where)
    window = enqueued_window(enqueued_after, enqueued_before)
    dst = live(connection)
    src = dst if source_connection is None else live(source_connection)
    answers_interrupts()  # interrupted: the copies in flight confirmed, then its Report (connections/interrupts.py)
    try:
        # The window's numbers, found by blocking peeks: off the loop those peeks run on.
        span = False if window is None else await asyncio.to_thread(locate, src, src_path, window)
        given = (given_text(enqueued_after), given_text(enqueued_before))
        start = await _start(src, src_path, dst, dst_path, where, keep_message_id, max_messages, state, resume, given)
    except asyncio.CancelledError:
        return before_anything(Report("copy", str(src_path), str(dst_path)))
    run = _CopyRun(src, src_path, start, matches=matches, keep_message_id=keep_message_id, max_messages=max_messages,
                   span=span, max_held_bytes=max_held_bytes)  # fmt: skip
    run.rate = per_second
    with operation("copy", dst, dst_path, source=src_path) as traced:
        report = _finish(await _send(run, dst, dst_path, max_in_flight, progress), run, dst_path)
        traced.report(report)
    if matches is not None:
        matches.check()  # raised on every message: a mistake, and nothing was sent
        if matches.errors:
            report.stats.update(matches.stats())
            report.note(f"{matches.describe()}: not copied")
    return report


# grace: interrupted, the record is saved before the cell ends (the same command again reads it)
@renamed(**COPY_RENAMED)
@sync_form(acopy, grace=2.0)
def copy(
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
    connection: ConnectionLike = None,
) -> Report:
    """Copy messages by peeking (nothing locked, no delivery counted, the source untouched) to a
    queue or topic of the same or another namespace (``source_connection``), through the send
    pipeline, resumable (see ``acopy`` and the module docstring)."""
    raise NotImplementedError  # never runs: @sync_form runs acopy


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


@renamed(**COPY_RENAMED)
@arguments_of(acopy)
def copy_record(
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
    connection: ConnectionLike = None,
) -> Path:
    """The file that records an unfinished copy made with these arguments (``acopy``'s: a copy's own
    can be given as they are); it exists only while such a copy is not complete. The source, the
    target, their connections, ``where``, ``keep_message_id`` and ``max_messages`` choose it; the other
    arguments change nothing here. A copy given ``state`` or a ``where`` function keeps no record:
    ``InvalidInputError``."""
    return _record_of(locals())[0]  # the arguments, by name (nothing else is defined yet)


@renamed(**COPY_RENAMED)
@arguments_of(acopy)
def copy_resume_point(
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
    connection: ConnectionLike = None,
) -> CopyProgress | None:
    """What an unfinished copy with these arguments (``acopy``'s, as for ``copy_record``) did, from
    its record on disk, or None (none, or its source or target was deleted and created again since:
    see ``copy_progress.created_times``). A copy with ``resume=False`` starts afresh all the same."""
    record, src, source, dst, target = _record_of(locals())  # the arguments, by name
    return load(record, created_times(src, source, dst, target))[0]
