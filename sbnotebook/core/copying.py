"""Copying messages from one entity to a queue or topic, in the same namespace or another, by
peeking: nothing is locked, no delivery is counted, the source is left as it was.

The one scanner (``scan.ascan``) reads the source page by page on the source's live connection;
each message becomes a faithful copy (``copies.copy_message(resubmission=False)``: body bytes,
every property, the dead-letter reason and description kept, time to live, a scheduled time still
ahead) and goes through the one send pipeline (``pipeline.send_all``: batches, at most
``max_in_flight`` sends, retries, one outcome per message) on the target's connection. Pages are
pulled only as the sends take them, so memory holds the scan's windows in flight and the sends'
batches, whatever the source's size.

Resumable: a :class:`CopyProgress` records the source sequence numbers copied (every one up to
``done`` but those in ``failed``, as an import records lines). Interrupted, the same call with the
same progress copies only what is left: a copy's fresh message id is derived from the progress's
seed and the source sequence number, so copies sent again after an interrupt carry the same ids
(a target with duplicate detection drops them; without it they are duplicated, as for an import).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import asdict, dataclass, field
from typing import Any

from .copies import copy_message
from .entities import EntityPath
from .errors import InvalidInputError
from .jsonl import LineTracker
from .live import ConnectionLike, LiveConnection, live
from .loop import aclose_when_idle
from .outcome import Outcome, Report
from .pipeline import RetryPolicy, send_all
from .records import to_record
from .scan import ascan
from .syncforms import sync_form

# Scan windows in flight for a copy: one page peeked at a time. The sends, not the peeks, set the
# pace: 2,000 messages between two emulators at 80 ms took 1.39 s with 1 and 1.44 s with 4, whose
# peak allocation was 1.8x (benchmarks/interactive_latency.py --only copy).
COPY_CONCURRENCY = 1


@dataclass
class CopyProgress:
    """What a copy from ``source`` to ``target`` has done: every source sequence number up to
    ``done`` was copied except those in ``failed``; ``copied`` messages in all (for ``limit``).
    ``seed`` makes the copies' fresh message ids the same when they are sent again."""

    source: str
    target: str
    seed: str = field(default_factory=lambda: str(uuid.uuid4()))
    done: int = 0
    failed: set[int] = field(default_factory=set)
    copied: int = 0
    complete: bool = False

    @property
    def pending(self) -> bool:
        return not self.complete and (self.done > 0 or bool(self.failed))

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "failed": sorted(self.failed)}


def copy_target(target: str | EntityPath) -> EntityPath:
    """A copy goes to a queue or a topic: a subscription or a dead-letter queue cannot be sent to."""
    path = EntityPath.parse(target)
    if path.is_subscription or path.is_dead_letter:
        raise InvalidInputError(
            f"Copies go to a queue or a topic, not to {path}: Service Bus takes no messages sent to a "
            f"subscription or a dead-letter queue (copy to the topic {path.name}, or to a queue)."
        )
    return path


async def acopy(
    source: str | EntityPath,
    target: str | EntityPath,
    *,
    where: str | Callable[[dict[str, Any]], bool] | None = None,
    limit: int | None = None,
    keep_ids: bool = False,
    max_in_flight: int = 10,
    progress: Callable[[Report], None] | None = None,
    state: CopyProgress | None = None,
    source_connection: ConnectionLike = None,
    concurrency: int = COPY_CONCURRENCY,
    connection: ConnectionLike = None,
) -> Report:
    """Copy the messages of ``source`` (an entity, a subscription, a dead-letter queue), all or those
    ``where`` selects (a search, as for ``compile_where``), at most ``limit``, to the queue or topic
    ``target`` (see the module docstring). ``source_connection``: the source's namespace (default:
    ``connection``, the target's). Fresh message ids (the original's in
    ``sbnotebook-original-message-id``) unless ``keep_ids``. ``state``: a ``CopyProgress`` to resume
    and to update (made fresh when not given). One ``sent`` or ``failed`` outcome per message."""
    from .search import compile_where

    src_path = EntityPath.parse(source)
    dst_path = copy_target(target)
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise InvalidInputError(f"limit must be a positive whole number, not {limit!r}.")
    matches = compile_where(where) if isinstance(where, str) else where
    dst = live(connection)
    src = dst if source_connection is None else live(source_connection)
    if state is None:
        state = CopyProgress(str(src_path), str(dst_path))
    state.complete = False
    tracker = LineTracker(state, None)
    seed = uuid.UUID(state.seed)
    before = state.copied
    left = None if limit is None else max(limit - state.copied, 0)
    first = min(state.failed) if state.failed else state.done + 1
    name = str(src_path)

    def counted(o: Outcome) -> None:
        tracker.outcome(o)
        if o.outcome == "sent" and o.index is not None:
            state.copied += 1

    async def copies() -> AsyncGenerator[Any, None]:
        taken = 0
        async for page in _pages(src, src_path, first, concurrency):
            for msg in page:
                seq = int(msg.sequence_number or 0)
                if seq <= state.done and seq not in state.failed:
                    continue  # copied by an earlier run
                if matches is not None and not matches(to_record(msg, name)):
                    continue
                if left is not None and taken >= left:
                    return
                taken += 1
                tracker.taken(seq)
                yield copy_message(
                    msg,
                    keep_message_id=keep_ids,
                    message_id=str(uuid.uuid5(seed, str(seq))),
                    resubmission=False,
                )
        tracker.exhausted = True

    async with aclosing(copies()) as messages:  # an interrupt closes the scan on the source at once
        report = await dst.call(
            send_all(
                dst,
                dst_path,
                messages,
                max_in_flight=max_in_flight,
                batch=True,
                retry=RetryPolicy(),
                progress=progress,
                schedule_at=None,
                on_outcome=counted,
            )
        )
    report.operation, report.entity, report.target = "copy", name, str(dst_path)
    if before:
        report.note(f"resumed: {before} copied before")
    exhausted_limit = left is not None and state.copied - before >= left
    if not state.failed and not tracker.lines and (tracker.exhausted or exhausted_limit):
        state.complete = True
    else:
        failed = sum(1 for o in report.failures if o.index is not None)
        if tracker.exhausted or exhausted_limit:
            report.note(f"{failed} messages not copied: the same copy again copies what is left")
        else:  # stopped part-way: what follows in the source was not read, so it is not counted here
            report.note(
                f"{failed} messages not copied, and the copy stopped before the end of {name} (the messages"
                " after them were not read): the same copy again copies what is left"
            )
    return report


async def _pages(src: LiveConnection, path: EntityPath, first: int, concurrency: int) -> AsyncIterator[list[Any]]:
    """The source's pages from ``first`` on, peeked on the source's connection and handed over to
    the caller's loop one at a time (the target's connection may run another loop)."""
    pages = ascan(path, start=first, concurrency=concurrency, connection=src)

    async def step() -> list[Any] | None:
        try:
            return await pages.__anext__()
        except StopAsyncIteration:
            return None

    try:
        while (page := await src.call(step())) is not None:
            yield page
    finally:
        await src.call(aclose_when_idle(pages))


copy = sync_form(
    acopy,
    """Copy messages by peeking (nothing locked, no delivery counted, the source untouched) to a
    queue or topic of the same or another namespace (``source_connection``), through the send
    pipeline, resumable with a ``CopyProgress`` (see ``acopy`` and the module docstring).""",
)
