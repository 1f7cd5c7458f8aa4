"""Where a run of a copy (``copying.acopy``) starts: the progress it resumes (``state=``, its record on
disk, or a fresh one), the tracker that follows each outcome back to its source sequence number,
and the record, saved before the first send so that a run after a kill finds the same seed.

The record's file, key and contents (and when it is set aside) are ``copy_progress``'s.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ...connections.live import LiveConnection
from ...entities import EntityPath
from ...files.resumable import LineTracker
from ...views.search import WhereLike
from .progress import CopyProgress, Record, created_times, load, record_key, record_path

log = logging.getLogger("sbnotebook.core.incidents.copy.api")  # a copy's log, whichever module of it says it
T = TypeVar("T")


@dataclass
class Start:
    """Where a run of a copy starts: its progress, the tracker that follows each outcome back to its
    source sequence number, and the record on disk (None: none is kept, as with ``state=`` or a
    ``where`` function); ``set_aside``: why a record found was not resumed, for the report."""

    state: CopyProgress
    tracker: LineTracker
    record: Path | None = None
    set_aside: str | None = None
    # A fresh record's creation times, asked for while the first peek is on its way (one round trip
    # sooner); the record is saved with them before the first send (``saved``). A thread's future, not
    # a loop's: it is asked for on the caller's loop and awaited on the target's (``send_copies``).
    created: Future[dict[str, str | None]] | None = None

    async def saved(self) -> None:
        """Before the first send: the record on disk, so a run after a kill finds the same seed."""
        if self.created is not None:
            record: Any = self.tracker.state  # the Record the tracker saves
            record.created, self.created = await asyncio.wrap_future(self.created), None
            self.tracker.save()


async def started_at(
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
) -> Start:
    """The progress a copy resumes: ``state`` if given, else its record on disk (unless ``resume`` is
    False, or the record was set aside), else a fresh one; a record is saved before the first send."""
    if state is not None or callable(where):
        if state is None:
            log.info("copy of %s: a function as where keeps no record on disk (resumed only with state=)", src_path)
            state = CopyProgress(str(src_path), str(dst_path))
        state.complete = False
        return Start(state, LineTracker(state, None))
    key = record_key(src, src_path, dst, dst_path, where, keep_message_id, max_messages, window)
    record = record_path(key)
    asked = in_background(created_times, src, src_path, dst, dst_path)
    found, set_aside = (None, None)
    if resume and record.is_file():  # a record to check against the entities' creation times first
        found, set_aside = load(record, await asyncio.wrap_future(asked))
    state = found if found is not None and found.pending else CopyProgress(str(src_path), str(dst_path))
    state.complete = False
    saved: Any = Record(state, key, {})  # a Resumable, but its failed is read-only (mypy's protocols)
    tracker = LineTracker(saved, record)
    saved.tracker = tracker
    record.parent.mkdir(parents=True, exist_ok=True)
    return Start(state, tracker, record, set_aside, created=asked)  # saved before the first send


def in_background(fn: Callable[..., T], *args: Any) -> Future[T]:
    """``fn(*args)`` on a thread of its own, as a future any loop can await (``asyncio.wrap_future``).
    ``asyncio.to_thread``'s task belongs to the loop that started it: awaited from another while it is
    still running, it raises "attached to a different loop"."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="sbnotebook-copy-start")
    try:
        return pool.submit(fn, *args)
    finally:
        pool.shutdown(wait=False)  # the thread ends when fn returns
