"""Moving messages (typically out of a dead-letter queue) without ever losing one.

For each message: the copy is sent and confirmed first, the original completed second.
A crash in between leaves a duplicate, never a gap. Messages a filter does not select are
released (given back without raising their delivery count), not abandoned.

The copy keeps body bytes, content type, subject, correlation id, session id, partition key,
reply-to, to and application properties; drops the dead-letter properties; records how often it
was resubmitted (``sbnotebook-resubmit-count``) and the original id; and takes a fresh message id
unless ``keep_message_id=True`` (duplicate detection on the target would drop it otherwise).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, cast

from .entities import EntityPath
from .errors import EntityNameError, InvalidInputError, SbError, from_sdk, is_connection_lost
from .live import ConnectionLike, LiveConnection, live
from .outcome import Outcome, Report
from .receive import DEFAULT_MAX_RENEWAL, LockedBatch, _receive
from .records import RECORD_FIELDS, SENDABLE_FIELDS, property_value, to_record
from .scan import ascan
from .send import RetryPolicy, _send, to_message

RESUBMIT_COUNT = "sbnotebook-resubmit-count"
ORIGINAL_ID = "sbnotebook-original-message-id"
DEAD_LETTER_PROPERTIES = {"deadletterreason", "deadlettererrordescription"}

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


def copy_message(msg: Any, *, keep_message_id: bool = False) -> Any:
    """A faithful copy for resubmission (see the module docstring)."""
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
        message_id=str(msg.message_id) if keep_message_id else str(uuid.uuid4()),
    )
    return copy


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
) -> Report:
    """Copy first (through the one send pipeline), complete second (one request per batch)."""
    started = time.perf_counter()
    report = Report("resubmit" if dst is not None else "discard", str(src), str(dst) if dst else None)
    final: dict[int, Outcome] = {}  # sequence number -> what happened, last word wins
    copied: set[int] = set()  # originals whose copy is confirmed
    wanted = await _selected(conn, src, where) if where is not None else None
    held: list[tuple[LockedBatch, list[int]]] = []  # looked at, not moved: given back at the end
    stopped: Outcome | None = None  # why the run ended early, after some messages moved
    moved = 0
    wait = 2.0  # for the first messages; later receives take what is there now
    try:
        while limit is None or moved < limit:
            if wanted is not None and not wanted:
                break  # every selected message has been handled: stop locking others
            want = batch_size if limit is None else min(batch_size, limit - moved)
            batch = await _receive(
                conn,
                src,
                count=want,
                mode="peek-lock",
                wait=wait,
                max_in_flight=max_in_flight,
                auto_renew=True,
                max_renewal=DEFAULT_MAX_RENEWAL,
                session_id=None,
            )
            if not batch.messages:
                await batch._close()
                break
            wait = 0.5
            keep: list[int] = []
            todo: list[int] = []
            copies: list[Any] = []
            for i, m in enumerate(batch.messages):
                seq = int(m.sequence_number or 0)
                if wanted is not None and seq not in wanted and seq not in copied:
                    keep.append(i)
                    final.setdefault(seq, Outcome(_mid(m), seq, "skipped", "not selected"))
                    continue
                if wanted is not None:
                    wanted.discard(seq)
                if seq in copied or dst is None:
                    todo.append(i)
                    copies.append(None)
                    continue
                copy = _copy_for(m, str(src), edit, keep_message_id)
                if copy is None:
                    keep.append(i)  # the edit said: leave it where it is
                    final[seq] = Outcome(_mid(m), seq, "skipped", "the edit returned None")
                    continue
                todo.append(i)
                copies.append(copy)
            to_send = [(i, c) for i, c in zip(todo, copies, strict=True) if c is not None]
            if to_send and dst is not None:
                sent = await _send(
                    conn,
                    dst,
                    [c for _, c in to_send],
                    max_in_flight=max_in_flight,
                    batch=True,
                    retry=RetryPolicy(),
                    progress=None,
                    schedule_at=None,
                )
                for pos, (i, _) in enumerate(to_send):
                    outcome = sent.of(index=pos)
                    m = batch.messages[i]
                    seq = int(m.sequence_number or 0)
                    if outcome is not None and outcome.outcome == "sent":
                        copied.add(seq)
                    else:  # the original stays where it was; not retried in this run
                        todo.remove(i)
                        keep.append(i)
                        error = outcome.error if outcome is not None else "the copy was not confirmed"
                        final[seq] = Outcome(
                            _mid(m), seq, "failed", error, None, tracking_id=getattr(outcome, "tracking_id", None)
                        )
            done = "resubmitted" if dst is not None else "discarded"
            settled = await batch.settle_async("complete", todo)
            for o in settled:
                seq = int(o.sequence_number or 0)
                if o.outcome == "completed":
                    final[seq] = Outcome(o.message_id, seq, done)
                    moved += 1
                else:
                    why = "the copy was sent but the original could not be completed: it will come back"
                    final[seq] = Outcome(
                        o.message_id, seq, "duplicated" if dst is not None else "failed", o.error or why
                    )
            report.notes.extend(n for n in settled.notes if n not in report.notes)
            held.append((batch, keep))
    except Exception as exc:
        if not copied and not moved:
            raise  # nothing moved: the caller may reconnect and start again
        # Some messages moved: what happened to each is the answer, and the failure says where it stopped.
        why = from_sdk(exc, entity=str(src)).message
        stopped = Outcome(None, None, "failed", f"stopped after {moved} messages: {why}; the rest were not touched")
        report.notes.append(f"stopped early: {why}")
    finally:
        for batch, keep in held:
            await batch.release_async(keep)
            await batch._close()
    report.extend(final.values())
    if stopped is not None:
        report.add(stopped)
    report.elapsed = time.perf_counter() - started
    return report


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
    copy = copy_message(msg, keep_message_id=keep_message_id)
    if edit is None:
        return copy
    record = to_record(msg, entity)
    # The edit gets its own copy of the properties map: editing it in place must not change `record`,
    # which _apply_edit compares against.
    edited = edit({**record, "application_properties": dict(record.get("application_properties") or {})})
    return None if edited is None else _apply_edit(copy, record, edited)


async def _selected(conn: LiveConnection, src: EntityPath, where: Callable[[Record], bool]) -> set[int]:
    """Sequence numbers the filter selects, found by peeking (no locks, no delivery counts)."""
    chosen: set[int] = set()
    async for page in ascan(src, connection=conn):
        for m in page:
            if where(to_record(m, str(src))):
                chosen.add(int(m.sequence_number or 0))
    return chosen


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
    connection: ConnectionLike = None,
) -> Report:
    """Move messages from ``source`` to ``target``: copy first, complete second.

    ``where(record)`` selects messages (others are released untouched); ``edit(record)`` returns the
    record to send (its ``body``/``body_text``/properties changed) or None to leave the message where
    it is. One outcome per message: resubmitted, skipped, duplicated or failed."""
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
        )
    )


def discard(
    source: str | EntityPath,
    *,
    where: Callable[[Record], bool] | None = None,
    limit: int | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Remove the selected messages for good (complete them). Others are released untouched,
    with no delivery counted, as in ``resubmit``. Destructive: the notebook layers ask first."""
    src = EntityPath.parse(source)
    _check_limit(limit, 10, 50)
    conn = live(connection)
    return conn.run(
        _resubmit_reconnecting(
            conn, src, None, where=where, edit=None, limit=limit, keep_message_id=False, max_in_flight=10, batch_size=50
        )
    )
