"""Moving messages (typically out of a dead-letter queue) without ever losing one.

For each message: the copy is sent and confirmed first, the original completed second.
A crash in between leaves a duplicate, never a gap. Messages a filter does not select are
released (given back without raising their delivery count), not abandoned.

The copy keeps body bytes, content type, subject, correlation id, session id, partition key,
reply-to, to and application properties; drops the dead-letter properties; records how often it
was resubmitted (``sbnotebook-resubmit-count``) and the original id; and takes a new message id
unless ``keep_message_id=True`` (duplicate detection on the target would drop it otherwise).

Bulk work (10^6 messages) streams: up to ``max_in_flight`` batches are on their way at once (receive,
send the copies, complete the originals), nothing is kept per moved message (the Report counts past
its detail limit), and ``progress(report)`` is called after each batch. Interrupted (a kernel
interrupt, the process killed), the same call run again finishes what is left: the originals not
completed are still there, and the copies already sent carry the same message id again (``copy_id``,
or the original's with ``keep_message_id``), so a target with duplicate detection drops them.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, cast

from .entities import EntityPath
from .errors import EntityNameError, InvalidInputError, SbError, from_sdk, is_connection_lost
from .live import ConnectionLike, LiveConnection, live
from .outcome import Outcome, Report
from .receive import DEFAULT_MAX_RENEWAL, LockedBatch, receive_batch
from .records import RECORD_FIELDS, SENDABLE_FIELDS, property_value, to_record
from .scan import ascan
from .send import RetryPolicy, send_all, to_message

RESUBMIT_COUNT = "sbnotebook-resubmit-count"
ORIGINAL_ID = "sbnotebook-original-message-id"
DEAD_LETTER_PROPERTIES = {"deadletterreason", "deadlettererrordescription"}
_COPY_IDS = uuid.UUID("6b1f3c52-3f0e-4a57-9a39-2b8f1d0c7e41")  # the namespace of copy_id's name-based ids

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


def copy_id(msg: Any, source: str) -> str:
    """The copy's message id: new (the original's may still be in the target's duplicate detection
    history, which would drop the copy) but the same every time this message is resubmitted from
    ``source``: a re-run after an interruption sends the copies already sent with the same ids, and
    a target with duplicate detection drops them. The source's sequence number makes it unique;
    the resubmit count makes the next resubmission of the same message (dead-lettered again) new."""
    props = msg.application_properties or {}
    count = props.get(RESUBMIT_COUNT.encode(), props.get(RESUBMIT_COUNT, 0))
    key = f"{source.lower()}|{_seq(msg)}|{msg.message_id}|{count}"
    return str(uuid.uuid5(_COPY_IDS, key))


def copy_message(msg: Any, *, keep_message_id: bool = False, source: str | None = None) -> Any:
    """A faithful copy for resubmission (see the module docstring). Its message id is the
    original's with ``keep_message_id``, else :func:`copy_id` when the ``source`` is named, else a
    random one."""
    from azure.servicebus import ServiceBusMessage
    from azure.servicebus.amqp import AmqpMessageBodyType

    props: dict[str, Any] = {}
    for key, value in (msg.application_properties or {}).items():
        name = key.decode() if isinstance(key, bytes) else str(key)
        if name.lower() in DEAD_LETTER_PROPERTIES:
            continue
        props[name] = value.decode() if isinstance(value, bytes) else value
    previous = props.get(RESUBMIT_COUNT, 0)
    try:
        props[RESUBMIT_COUNT] = int(previous) + 1
    except (TypeError, ValueError):
        props[RESUBMIT_COUNT] = 1
    props.setdefault(ORIGINAL_ID, str(msg.message_id))
    if msg.body_type == AmqpMessageBodyType.DATA:
        body: Any = b"".join(bytes(b) for b in msg.body)
    else:
        body = property_value(msg.body)
    copy = ServiceBusMessage(
        body,
        content_type=msg.content_type,
        subject=msg.subject,
        correlation_id=msg.correlation_id,
        session_id=msg.session_id,
        partition_key=msg.partition_key,
        to=msg.to,
        reply_to=msg.reply_to,
        reply_to_session_id=msg.reply_to_session_id,
        application_properties=cast(Any, props),
        message_id=str(msg.message_id)
        if keep_message_id
        else (copy_id(msg, source) if source is not None else str(uuid.uuid4())),
    )
    return copy


@dataclass
class _Run:
    """What the workers of one resubmit share. Memory is bounded by what is in flight, the messages
    held back (not selected, or left by the edit) and the problems: nothing grows per moved message."""

    report: Report
    limit: int | None
    selection: _Selection | None
    progress: Callable[[Report], None] | None
    claimed: int = 0  # messages asked for by receives in flight or done (the limit counts these)
    moved: int = 0
    stop: bool = False
    workers: int = 0
    # Copied but not completed (lock lost): reported as duplicated at the end unless it comes back
    # in this run and is completed then. Only problems are kept here, never every message.
    copied: dict[int, Outcome] = field(default_factory=dict)
    held: list[tuple[LockedBatch, list[int]]] = field(default_factory=list)  # given back at the end

    def want(self, batch_size: int) -> int:
        if self.limit is None:
            return batch_size
        return max(0, min(batch_size, self.limit - self.claimed))

    def tick(self) -> None:
        if self.progress is not None:
            self.progress(self.report)


@dataclass
class _Selection:
    """What ``where`` selected when the run began, found by peeking: how many, and the highest
    sequence number among them. Each received message is checked with ``where`` again; a message
    past the highest, or once all were found, ends the run (nothing beyond it gets locked)."""

    where: Callable[[Record], bool]
    count: int
    last: int
    found: int = 0

    def done(self) -> bool:
        return self.found >= self.count


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
) -> Report:
    """Copy first (send), complete second (one request per batch), with up to ``max_in_flight``
    batches on their way at once (each worker: receive, send the copies, complete the originals),
    so a batch costs about three round trips and ``max_in_flight`` of them overlap."""
    started = time.perf_counter()
    report = Report("resubmit" if dst is not None else "discard", str(src), str(dst) if dst else None)
    report.stats.update(batches=0, workers=0)
    selection = await _selected(conn, src, where) if where is not None else None
    run = _Run(report, limit, selection, progress)
    failure: BaseException | None = None
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
        if selection is None and not run.held and (limit is None or run.moved < limit) and not await _empty(conn, src):
            # Locked by another receiver (a run that was interrupted holds its locks until they
            # expire), or new: not moved by this run, and the report must not look complete.
            report.note(f"messages are still in {src} (locked by another receiver, or new): run it again to move them")
    except Exception as exc:
        if not run.moved and not run.copied:
            raise  # nothing moved: the caller may reconnect and start again
        # Some messages moved: what happened to each is the answer, and the failure says where it stopped.
        why = from_sdk(exc, entity=str(src)).message
        report.add(
            Outcome(None, None, "failed", f"stopped after {run.moved} messages: {why}; the rest were not touched")
        )
        report.note(f"stopped early: {why}")
    finally:
        for task in workers:  # cancelled (an interrupted cell): each gives back what it holds
            task.cancel()
        if workers:
            await asyncio.gather(*workers, return_exceptions=True)
        for batch, keep in run.held:
            await batch.release_async(keep)
            await batch.aclose()
        report.extend(run.copied.values())
        report.elapsed = time.perf_counter() - started
    return report


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
            if run.selection is not None and run.selection.done():
                return  # every selected message has been handled: stop locking others
            want = run.want(batch_size)
            if want == 0:
                return
            run.claimed += want
            batch = await receive_batch(
                conn,
                src,
                count=want,
                mode="peek-lock",
                wait=wait,
                max_in_flight=1,
                auto_renew=True,
                max_renewal=DEFAULT_MAX_RENEWAL,
                session_id=None,
            )
            run.claimed -= want - len(batch.messages)
            wait = 0.5
            if not batch.messages:
                await batch.aclose()
                return
            if first and len(batch.messages) == want and not run.stop:
                first = False
                # A full first batch: more is waiting. The others start at once (each opens its
                # links, about half a second, all in parallel rather than one after the other).
                for _ in range(max_workers - run.workers):
                    start_worker(False)
            try:
                keep = await _move(conn, src, dst, run, batch, edit, keep_message_id)
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


async def _empty(conn: LiveConnection, src: EntityPath) -> bool:
    """One peek from the first sequence number (a peek sees locked messages too)."""
    async with aclosing(ascan(src, limit=1, page_size=1, concurrency=1, connection=conn)) as pages:
        async for _ in pages:
            return False
    return True


def _seq(msg: Any) -> int:
    return int(msg.sequence_number or 0)


async def _move(
    conn: LiveConnection,
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
    todo: list[int] = []
    copies: list[Any] = []
    for i, m in enumerate(batch.messages):
        seq = _seq(m)
        if run.selection is not None and seq not in run.copied:
            if seq > run.selection.last or not run.selection.where(to_record(m, str(src))):
                keep.append(i)
                report.add(Outcome(_mid(m), seq, "skipped", "not selected"))
                continue
            run.selection.found += 1
        if seq in run.copied or dst is None:
            todo.append(i)
            continue
        copy = _copy_for(m, str(src), edit, keep_message_id)
        if copy is None:
            keep.append(i)  # the edit said: leave it where it is
            report.add(Outcome(_mid(m), seq, "skipped", "the edit returned None"))
            continue
        todo.append(i)
        copies.append((i, copy))
    if copies and dst is not None:
        sent = await send_all(
            conn,
            dst,
            [c for _, c in copies],
            max_in_flight=1,
            batch=True,
            retry=RetryPolicy(),
            progress=None,
            schedule_at=None,
        )
        by_index = {o.index: o for o in sent}
        for pos, (i, _) in enumerate(copies):
            outcome = by_index.get(pos)
            if outcome is None or outcome.outcome != "sent":  # the original stays; not retried in this run
                m = batch.messages[i]
                todo.remove(i)
                keep.append(i)
                error = outcome.error if outcome is not None else "the copy was not confirmed"
                tracking = outcome.tracking_id if outcome is not None else None
                report.add(Outcome(_mid(m), _seq(m), "failed", error, None, tracking_id=tracking))
    done = "resubmitted" if dst is not None else "discarded"
    settled = await batch.settle_async("complete", todo)
    for o in settled:
        seq = int(o.sequence_number or 0)
        if o.outcome == "completed":
            run.copied.pop(seq, None)
            report.add(Outcome(o.message_id, seq, done))
            run.moved += 1
        elif dst is not None:
            why = o.error or "the copy was sent but the original could not be completed: it will come back"
            run.copied[seq] = Outcome(o.message_id, seq, "duplicated", why)
        else:
            report.add(Outcome(o.message_id, seq, "failed", o.error))
    for n in settled.notes:
        report.note(n)
    return keep


async def _resubmit_reconnecting(
    conn: LiveConnection, src: EntityPath, dst: EntityPath | None, **kwargs: Any
) -> Report:
    """``_resubmit``, with what every call does on a dropped connection (reconnect, try once more,
    else one of the kit's errors), safe here because a failure with nothing moved changed nothing."""
    try:
        try:
            return await _resubmit(conn, src, dst, **kwargs)
        except Exception as first:
            if not is_connection_lost(first):
                raise
            await conn.reconnect(why=first)  # logged there, with why
        report = await _resubmit(conn, src, dst, **kwargs)
        report.note("reconnected: the connection had dropped (nothing had moved yet)")
        return report
    except SbError:
        raise
    except Exception as exc:
        raise from_sdk(exc, entity=str(src)) from None


def _mid(msg: Any) -> str | None:
    return str(msg.message_id) if msg.message_id is not None else None


def _copy_for(
    msg: Any, entity: str, edit: Callable[[Record], Record | None] | None, keep_message_id: bool
) -> Any | None:
    copy = copy_message(msg, keep_message_id=keep_message_id, source=entity)
    if edit is None:
        return copy
    record = to_record(msg, entity)
    # The edit gets its own copy of the properties map: editing it in place must not change `record`,
    # which _apply_edit compares against.
    edited = edit({**record, "application_properties": dict(record.get("application_properties") or {})})
    return None if edited is None else _apply_edit(copy, record, edited)


async def _selected(conn: LiveConnection, src: EntityPath, where: Callable[[Record], bool]) -> _Selection:
    """How many messages the filter selects and the highest sequence number among them, found by
    peeking (no locks, no delivery counts). Two numbers, whatever the size of the entity."""
    count = last = 0
    async for page in ascan(src, connection=conn):
        for m in page:
            if where(to_record(m, str(src))):
                count += 1
                last = max(last, _seq(m))
    return _Selection(where, count, last)


_NOT_SENT = set(RECORD_FIELDS) - set(SENDABLE_FIELDS)  # broker-set fields an edit cannot change


def _apply_edit(copy: Any, original: Record, edited: Record) -> Any:
    """Rebuild the copy from an edited record, keeping the resubmission bookkeeping.
    An edited ``body`` wins; otherwise an edited ``body_text`` becomes the body."""
    record = {k: v for k, v in edited.items() if k not in _NOT_SENT}
    for timing in ("time_to_live", "scheduled_enqueue_time"):  # like copy_message: only if the edit set them
        if record.get(timing) == original.get(timing):
            record.pop(timing, None)
    if edited.get("body") == original.get("body") and edited.get("body_text") is not None:
        record["body"] = edited["body_text"]
    # Properties the edit changed or added are set; ones it removed are dropped; the others keep the
    # copy's typed values (the record holds them as text, so writing them back would change types).
    before = original.get("application_properties") or {}
    after = edited.get("application_properties") or {}
    props = {k: v for k, v in (copy.application_properties or {}).items() if _name(k) not in set(before) - set(after)}
    props.update({k: v for k, v in after.items() if k not in before or before[k] != v})
    record["application_properties"] = {k: v for k, v in props.items() if k.lower() not in DEAD_LETTER_PROPERTIES}
    record["message_id"] = copy.message_id
    return to_message(record)


def _name(key: Any) -> str:
    return key.decode() if isinstance(key, bytes) else str(key)


def _check_limit(limit: int | None, max_in_flight: int, batch_size: int) -> None:
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise InvalidInputError("limit must be a positive whole number.")
    for name, value in (("max_in_flight", max_in_flight), ("batch_size", batch_size)):
        if not isinstance(value, int) or value < 1:
            raise InvalidInputError(f"{name} must be a positive whole number, not {value!r}.")


def _target(src: EntityPath, target: str | EntityPath | None, allow_fan_out: bool) -> EntityPath:
    dst = EntityPath.parse(target) if target is not None else default_target(src)
    if src.is_subscription and dst.name.lower() == src.name.lower() and not allow_fan_out:
        raise _fan_out_refused(src)
    return dst


def resubmit(
    source: str | EntityPath,
    *,
    target: str | EntityPath | None = None,
    where: Callable[[Record], bool] | None = None,
    edit: Callable[[Record], Record | None] | None = None,
    limit: int | None = None,
    keep_message_id: bool = False,
    allow_fan_out: bool = False,
    max_in_flight: int = 10,
    batch_size: int = 50,
    progress: Callable[[Report], None] | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Move messages from ``source`` to ``target``: copy first, complete second.

    ``where(record)`` selects messages (others are released untouched); ``edit(record)`` returns the
    record to send (its ``body``/``body_text``/properties changed) or None to leave the message where
    it is. One outcome per message: resubmitted, skipped, duplicated or failed. ``progress(report)``
    after each batch (from the connection's thread). Run again after an interruption, it finishes
    what is left (see the module docstring)."""
    src = EntityPath.parse(source)
    dst = _target(src, target, allow_fan_out)
    _check_limit(limit, max_in_flight, batch_size)
    conn = live(connection)
    return conn.run(
        _resubmit_reconnecting(
            conn,
            src,
            dst,
            where=where,
            edit=edit,
            limit=limit,
            keep_message_id=keep_message_id,
            max_in_flight=max_in_flight,
            batch_size=batch_size,
            progress=progress,
        )
    )


async def aresubmit(
    source: str | EntityPath,
    *,
    target: str | EntityPath | None = None,
    where: Callable[[Record], bool] | None = None,
    edit: Callable[[Record], Record | None] | None = None,
    limit: int | None = None,
    keep_message_id: bool = False,
    allow_fan_out: bool = False,
    max_in_flight: int = 10,
    batch_size: int = 50,
    progress: Callable[[Report], None] | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """The async form of :func:`resubmit`."""
    src = EntityPath.parse(source)
    dst = _target(src, target, allow_fan_out)
    _check_limit(limit, max_in_flight, batch_size)
    conn = live(connection)
    return await conn.call(
        _resubmit_reconnecting(
            conn,
            src,
            dst,
            where=where,
            edit=edit,
            limit=limit,
            keep_message_id=keep_message_id,
            max_in_flight=max_in_flight,
            batch_size=batch_size,
            progress=progress,
        )
    )


def discard(
    source: str | EntityPath,
    *,
    where: Callable[[Record], bool] | None = None,
    limit: int | None = None,
    progress: Callable[[Report], None] | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Remove the selected messages for good (complete them). Others are released untouched,
    with no delivery counted, as in ``resubmit``. Destructive: the notebook layers ask first."""
    src = EntityPath.parse(source)
    _check_limit(limit, 10, 50)
    conn = live(connection)
    return conn.run(
        _resubmit_reconnecting(
            conn,
            src,
            None,
            where=where,
            edit=None,
            limit=limit,
            keep_message_id=False,
            max_in_flight=10,
            batch_size=50,
            progress=progress,
        )
    )
