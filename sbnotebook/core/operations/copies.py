"""Copies for resubmission, and the one "copy first, then complete".

The copy keeps the body (its AMQP kind: data, value or sequence, and its content), content type,
subject, correlation id, session id, partition key, reply-to, to and application properties, each
with its AMQP type (``operations.typed``); drops the dead-letter properties; records how often it
was resubmitted (``sbnotebook-resubmit-count``) and the original id; and takes a new message id
unless ``keep_message_id=True`` (duplicate detection on the target would drop it otherwise). It is a
new send: its trace context is its own, linked to the original's, which ``sbnotebook-original-traceparent``
keeps (``core/tracing.py``).

Whatever moves a locked message elsewhere (``resubmit``, ``deferral.resubmit_scheduled``, a
``process`` policy's ``dead_letter_to``, the Spark layer's deferred resubmit) goes through
:func:`acopy_then_complete`: the copy is sent and confirmed first, the original completed second,
so a failure in between leaves a duplicate (reported ``duplicated``), never a gap.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from typing import Any, cast

from ..amqp_codec import TypedMessage
from ..connections.interrupts import report_of
from ..connections.live import LiveConnection
from ..entities import EntityPath
from ..outcome import MAX_DETAILS, Outcome, Report
from ..renames import renamed
from ..sdk.api import AmqpAnnotatedMessage, AmqpMessageBodyType
from ..sdk.messages import amqp_properties, as_service_bus_message
from ..times import When, parse_time
from ..tracing import original_context, renew_context
from ..views.records import RECORD_FIELDS, SENDABLE_FIELDS, body_bytes, to_record
from .batch import LockedBatch
from .messages import message_id, name_id, to_message
from .pipeline import RetryPolicy, send_all
from .typed import (
    Unsendable,
    Unsupported,
    body_arguments,
    id_values,
    typed_content,
    typed_properties,
    unsendable,
)

Record = dict[str, Any]

RESUBMIT_COUNT = "sbnotebook-resubmit-count"
ORIGINAL_ID = "sbnotebook-original-message-id"
DEAD_LETTER_PROPERTIES = {"deadletterreason", "deadlettererrordescription"}
PARTITION_KEY = b"x-opt-partition-key"  # the message annotation ServiceBusMessage.partition_key sets
_COPY_IDS = uuid.UUID("6b1f3c52-3f0e-4a57-9a39-2b8f1d0c7e41")  # the namespace of copy_id's name-based ids


def copy_id(msg: Any, source: str, original_id: str | None = None) -> str:
    """The copy's message id: new (the original's may still be in the target's duplicate detection
    history, which would drop the copy) but the same every time this message is resubmitted from
    ``source``: a re-run after an interruption sends the copies already sent with the same ids, and
    a target with duplicate detection drops them. The source's sequence number makes it unique;
    the resubmit count makes the next resubmission of the same message (dead-lettered again) new.
    ``original_id``: the original's message id, when the caller has read it already."""
    props = msg.application_properties or {}
    count = props.get(RESUBMIT_COUNT.encode(), props.get(RESUBMIT_COUNT, 0))
    if original_id is None:
        original_id = msg.message_id
    key = f"{source.lower()}|{int(msg.sequence_number or 0)}|{original_id}|{count}"
    return name_id(_COPY_IDS, key)


def copy_message(
    msg: Any,
    *,
    keep_message_id: bool = False,
    source: str | None = None,
    message_id: str | None = None,
    resubmission: bool = True,
) -> Any:
    """A faithful copy for resubmission (see the module docstring), as a ``ServiceBusMessage``. Its
    message id is the original's with ``keep_message_id``, else ``message_id`` when given, else
    :func:`copy_id` when the ``source`` is named, else a random one. The body keeps its AMQP kind
    (data, value, sequence) and every application property its type (``operations.typed``); a
    message the SDK cannot send so comes back :class:`Unsendable` (the send reports why).

    ``resubmission=False`` makes a plain copy (``core.copy``): every application property kept, the
    dead-letter reason and description too, no resubmit count; the time to live kept, and a
    scheduled time while it is still ahead (as an import does); the original id in
    ``sbnotebook-original-message-id`` when the copy has a new one."""
    # Each getter of a received message lists its AMQP sections: the properties are read at once.
    properties = amqp_properties(msg)
    typed = typed_content(msg)
    if typed is not None:  # the ids with their AMQP types (a ulong, a uuid, binary), not as the SDK reads them
        properties.update(id_values(typed.ids))
    typed_id = properties["message_id"]  # with its AMQP type: the copy's original-id property keeps it
    properties["message_id"] = _copy_id(msg, typed_id, keep_message_id, message_id, source)
    try:
        props = _copied_properties(msg, typed, resubmission, keep_message_id, typed_id, properties["message_id"])
        body = body_arguments(typed) if typed is not None else {"data_body": body_bytes(msg)}
    except Unsupported as exc:
        return unsendable(properties["message_id"], exc)
    partition_key = msg.partition_key
    # Built as the AMQP message the SDK would make from ServiceBusMessage(body, subject=..., ...),
    # without its property setters (each lists the message's sections again): a third of the cost.
    # tests/core/operations/test_copies.py checks the two encode to the same bytes.
    annotated = AmqpAnnotatedMessage(
        **body,
        properties=properties,
        application_properties=cast(Any, props),
        annotations=cast(Any, {PARTITION_KEY: partition_key}) if partition_key else None,
    )
    copy = as_service_bus_message(annotated)
    if not resubmission:
        if msg.time_to_live is not None:
            copy.time_to_live = msg.time_to_live
        when = msg.scheduled_enqueue_time_utc
        if when is not None and when > dt.datetime.now(dt.UTC):
            copy.scheduled_enqueue_time_utc = when
    return copy


def _copy_id(msg: Any, original: Any, keep: bool, given: str | None, source: str | None) -> Any:
    if keep:
        return original  # as it was: a ulong, uuid or binary id stays one
    if given is not None:
        return given
    return copy_id(msg, source, original) if source is not None else str(uuid.uuid4())


def _copied_properties(
    msg: Any, typed: TypedMessage | None, resubmission: bool, keep_message_id: bool, original_id: Any, new_id: Any
) -> dict[str, Any]:
    """The copy's application properties, each with its type (the SDK's decoded values when the
    message's bytes were not kept), less the dead-letter ones on a resubmission, plus the kit's."""
    if typed is not None:
        props = typed_properties(typed.properties)
    else:
        raw = msg.application_properties or {}
        props = {_text(k): v.decode() if isinstance(v, bytes) else v for k, v in raw.items()}
    if resubmission:
        props = {k: v for k, v in props.items() if k.lower() not in DEAD_LETTER_PROPERTIES}
        previous = (msg.application_properties or {}).get(RESUBMIT_COUNT.encode(), 0)
        try:
            props[RESUBMIT_COUNT] = int(previous) + 1
        except (TypeError, ValueError):
            props[RESUBMIT_COUNT] = 1
    if (resubmission or not keep_message_id) and original_id is not None:
        props.setdefault(ORIGINAL_ID, _typed_id(typed, original_id))
    # A new send: its own trace context, linked to the original's (kept in sbnotebook-original-traceparent).
    renew_context(props, original_context(msg.application_properties), new_id)
    return props


def original_of(record: Record) -> str | None:
    """The message id of the original ``record`` is a copy of (the ``sbnotebook-original-message-id``
    its copy was given), as text; None for a message that is no copy of the kit's."""
    value = (record.get("application_properties") or {}).get(ORIGINAL_ID)
    return None if value is None else str(value)


def _typed_id(typed: TypedMessage | None, original_id: Any) -> Any:
    """The original's message id as a property value of its AMQP type: a ulong, uuid or binary id
    stays one (``str()`` made the text "b'...'" of a binary id, an int of a ulong)."""
    kept = typed.ids.get("message_id") if typed is not None else None
    return original_id if kept is None else typed_properties({ORIGINAL_ID: kept})[ORIGINAL_ID]


def copy_for(
    msg: Any, entity: str, edit: Callable[[Record], Record | None] | None, keep_message_id: bool
) -> Any | None:
    """The copy to send for ``msg``, passed through ``edit(record)`` when given (None: the edit
    said to leave the message where it is)."""
    copy = copy_message(msg, keep_message_id=keep_message_id, source=entity)
    if edit is None:
        return copy
    record = to_record(msg, entity)
    # The edit gets its own copy of the properties map: editing it in place must not change `record`,
    # which apply_edit compares against.
    edited = edit({**record, "application_properties": dict(record.get("application_properties") or {})})
    return None if edited is None else apply_edit(copy, record, edited)


_NOT_SENT = set(RECORD_FIELDS) - set(SENDABLE_FIELDS)  # broker-set fields an edit cannot change


def apply_edit(copy: Any, original: Record, edited: Record) -> Any:
    """Rebuild the copy from an edited record, keeping the resubmission bookkeeping.
    An edited ``body`` wins; otherwise an edited ``body_text`` becomes the body (a data body); a
    body left as it was keeps its kind (a value or a sequence stays one)."""
    if isinstance(copy, Unsendable):
        return copy
    kept_body = edited.get("body") == original.get("body") and edited.get("body_text") == original.get("body_text")
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
    props = {k: v for k, v in (copy.application_properties or {}).items() if _text(k) not in set(before) - set(after)}
    props.update({k: v for k, v in after.items() if k not in before or before[k] != v})
    record["application_properties"] = {k: v for k, v in props.items() if k.lower() not in DEAD_LETTER_PROPERTIES}
    record["message_id"] = copy.message_id
    made = to_message(record)
    # The record holds the ids as text: the copy's own, and a correlation id the edit left, keep their type.
    ids = copy.raw_amqp_message.properties
    made.message_id = ids.message_id
    if edited.get("correlation_id") == original.get("correlation_id"):
        made.correlation_id = ids.correlation_id
    return _with_body_of(copy, made) if kept_body else made


def _with_body_of(copy: Any, made: Any) -> Any:
    """``made`` with ``copy``'s body when that is an AMQP value or sequence (the record holds it as
    JSON text, which would make it a data body)."""
    raw = copy.raw_amqp_message
    if raw.body_type == AmqpMessageBodyType.VALUE:
        body: dict[str, Any] = {"value_body": raw.body}
    elif raw.body_type == AmqpMessageBodyType.SEQUENCE:
        body = {"sequence_body": list(raw.body)}
    else:
        return made
    parts = made.raw_amqp_message
    return as_service_bus_message(
        AmqpAnnotatedMessage(
            **body,
            header=parts.header,
            properties=parts.properties,
            application_properties=parts.application_properties,
            annotations=parts.annotations,
        )
    )


def _text(key: Any) -> str:
    return key.decode() if isinstance(key, bytes) else str(key)


NOT_COMPLETED = "the copy was sent but the original could not be completed: it will come back"
LOST_BEFORE_COPY = "the lock was lost before the copy was sent: no copy sent, the original comes back"


async def _sender_ready(sender: Any) -> None:
    return None


def check_target(connection: LiveConnection, target: EntityPath) -> None:
    """Open (or borrow) a sender link to ``target``: one that does not exist, or refuses this key,
    raises here, before a multi-step operation changes anything (defer, complete, dead-letter)."""
    connection.run_on(target, connection.with_link("sender", target, _sender_ready))


def _lock_held(batch: LockedBatch, copies: Sequence[tuple[int, Any]], report: Report) -> Sequence[tuple[int, Any]]:
    """The copies whose original is still locked. One whose lock is already gone gets no copy: its
    original comes back whatever is sent, so a copy would be a duplicate. It is reported
    ``lock_lost`` and left as it is, for a later run to move once."""
    gone = {row for row, _ in copies if batch.lock_gone(row)}
    for row in sorted(gone):
        msg = batch.messages[row]
        report.add(Outcome(message_id(msg), int(msg.sequence_number or 0), "lock_lost", LOST_BEFORE_COPY, row))
    return [(row, message) for row, message in copies if row not in gone] if gone else copies


@renamed(at="schedule_at")
async def acopy_then_complete(
    batch: LockedBatch,
    copies: Sequence[tuple[int, Any]],
    target: str | EntityPath,
    *,
    schedule_at: When | None = None,
    also_complete: Sequence[int] = (),
) -> Report:
    """Send ``copies`` (pairs of a row of ``batch`` and the message to send for it) to ``target``,
    scheduled for ``schedule_at`` when given; then complete, in one settlement, the rows whose copy Service
    Bus confirmed and the rows of ``also_complete`` (copied earlier). One outcome per row, with the
    row as its index: ``completed``; ``failed`` (the copy was not confirmed: the original is left
    locked, untouched); or ``duplicated`` (the copy was sent, the original not completed). When no
    copy can be sent at all (a target that does not exist) the error is raised, no original touched."""
    path = EntityPath.parse(target)
    # Every outcome is kept, here and in the send and the settlement below: which copies were
    # confirmed is read by position, and the caller (resubmit, process) reads every row's outcome.
    # The batch holds each message already; past MAX_DETAILS only counts were kept, and 10,050
    # copies were reported "10000 completed, 50 failed" with those 50 originals left locked.
    limit = max(MAX_DETAILS, len(copies) + len(also_complete))
    report = Report("copy-then-complete", batch.entity, str(path), max_details=limit)
    copies = _lock_held(batch, copies, report)
    sent = Report("send", str(path))
    if copies:
        try:
            sent = await send_all(
                batch.connection,
                path,
                [message for _, message in copies],
                max_in_flight=1,
                batch=True,
                retry=RetryPolicy(),
                progress=None,
                schedule_at=None if schedule_at is None else parse_time(schedule_at, future=True, name="schedule_at"),
                max_details=limit,
            )
        except asyncio.CancelledError as stop:
            # Cancelled (the loop closing) with the send on its way: its outcomes are known, so the
            # originals of the copies confirmed are completed below, the others left; the caller's
            # loop stops at its next round (stop_if_cancelled), the cancellation still pending.
            done = report_of(stop)
            if done is None:
                raise
            sent = done
    confirmed = {o.index for o in sent.every() if o.outcome in ("sent", "scheduled")}
    failures = {o.index: o for o in sent.failures if o.index is not None}
    todo = list(also_complete)
    for pos, (row, _) in enumerate(copies):
        if pos in confirmed:
            todo.append(row)
            continue
        failure = failures.get(pos)
        msg = batch.messages[row]
        report.add(
            Outcome(
                message_id(msg),
                int(msg.sequence_number or 0),
                "failed",
                failure.error if failure is not None else "the copy was not confirmed",
                row,
                tracking_id=failure.tracking_id if failure is not None else None,
            )
        )
    settled = await batch.settle_async("complete", todo) if todo else Report("complete", batch.entity)
    for o in settled.every():
        report.add(
            o
            if o.outcome == "completed"
            else Outcome(o.message_id, o.sequence_number, "duplicated", o.error or NOT_COMPLETED, o.index)
        )
    for n in [*sent.notes, *settled.notes]:
        report.note(n)
    return report


@renamed(at="schedule_at")
def copy_then_complete(
    batch: LockedBatch,
    copies: Sequence[tuple[int, Any]],
    target: str | EntityPath,
    *,
    schedule_at: When | None = None,
) -> Report:
    """Copy first, then complete (see :func:`acopy_then_complete`), from outside the connection's loop."""
    return batch.connection.run(acopy_then_complete(batch, copies, target, schedule_at=schedule_at))
