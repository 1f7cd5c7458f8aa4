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

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from .clients import receiver as open_receiver
from .clients import sender as open_sender
from .connection import Connection, resolve
from .entities import EntityPath
from .errors import EntityNameError, InvalidInputError, SbError, from_sdk, tracking_id_of
from .records import property_value, to_record
from .send import to_message
from .sync import run_sync

RESUBMIT_COUNT = "sbnotebook-resubmit-count"
ORIGINAL_ID = "sbnotebook-original-message-id"
_DEAD_LETTER_PROPS = {"deadletterreason", "deadlettererrordescription"}

Record = dict[str, Any]


@dataclass
class ResubmitReport:
    source: str
    target: str
    moved: int = 0  # copy confirmed, original completed
    skipped: int = 0  # not selected (released untouched) or edit returned None
    duplicated: list[int] = field(default_factory=list)  # copy sent but the original could not be completed
    failed: list[tuple[int, str, str | None]] = field(default_factory=list)  # (sequence number, error, tracking id)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.duplicated

    def __repr__(self) -> str:
        return (
            f"ResubmitReport({self.source} -> {self.target}: {self.moved} moved, {self.skipped} skipped, "
            f"{len(self.duplicated)} duplicated, {len(self.failed)} failed)"
        )


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
        if name.lower() in _DEAD_LETTER_PROPS:
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
    connection: str | Connection | None = None,
    _discard: bool = False,
) -> ResubmitReport:
    """Move messages from ``source`` to ``target``: copy first, complete second.

    ``where(record)`` selects messages (others are released untouched); ``edit(record)`` returns the
    record to send (its ``body``/``body_text``/properties changed) or None to leave the message where it is.
    """
    src = EntityPath.parse(source)
    named = EntityPath.parse(target) if target is not None else None
    dst = src if _discard else named or default_target(src)
    if not _discard and src.is_subscription and dst.name.lower() == src.name.lower() and not allow_fan_out:
        raise _fan_out_refused(src)
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise InvalidInputError("limit must be a positive whole number.")
    conn = resolve(connection)
    report = ResubmitReport(str(src), "(discarded)" if _discard else str(dst))
    slots = asyncio.Semaphore(max_in_flight)
    held: list[Any] = []  # received but not moved (unselected, or its copy failed): given back at the end
    copied: set[int] = set()  # originals whose copy is confirmed
    try:
        async with (
            conn.async_client() as client,
            open_receiver(client, src, prefetch_count=0) as rcv,
            _maybe_sender(client, dst, not _discard) as snd,
        ):
            wanted = await _selected(rcv, src, where) if where is not None else None
            try:
                while limit is None or report.moved < limit:
                    if wanted is not None and not wanted:
                        break  # every selected message has been handled: stop locking others
                    want = batch_size if limit is None else min(batch_size, limit - report.moved)
                    got = await rcv.receive_messages(max_message_count=want, max_wait_time=2)
                    if not got:
                        break
                    todo = []
                    for m in got:
                        seq = int(m.sequence_number or 0)
                        if wanted is not None and seq not in wanted and seq not in copied:
                            held.append(m)
                            continue
                        if wanted is not None:
                            wanted.discard(seq)
                        todo.append(m)
                    await asyncio.gather(
                        *(
                            _move_one(m, rcv, snd, slots, report, edit, keep_message_id, str(src), held, copied)
                            for m in todo
                        )
                    )
            finally:
                for m in held:
                    await _release(rcv, m)
                report.skipped += len(held) - len(report.failed)
    except SbError:
        raise
    except Exception as exc:
        raise from_sdk(exc, entity=str(src)) from None
    return report


async def _selected(rcv: Any, src: EntityPath, where: Callable[[Record], bool]) -> set[int]:
    """Sequence numbers the filter selects, found by peeking (no locks, no delivery counts)."""
    chosen: set[int] = set()
    start = 1
    while page := await rcv.peek_messages(max_message_count=250, sequence_number=start):
        for m in page:
            if where(to_record(m, str(src))):
                chosen.add(int(m.sequence_number or 0))
        start = int(page[-1].sequence_number or 0) + 1
    return chosen


async def _move_one(
    msg: Any,
    rcv: Any,
    snd: Any,
    slots: asyncio.Semaphore,
    report: ResubmitReport,
    edit: Callable[[Record], Record | None] | None,
    keep_message_id: bool,
    entity: str,
    held: list[Any],
    copied: set[int],
) -> None:
    seq = int(msg.sequence_number or 0)
    async with slots:
        copy = copy_message(msg, keep_message_id=keep_message_id)
        if edit is not None:
            record = to_record(msg, entity)
            edited = edit(dict(record))
            if edited is None:
                held.append(msg)  # left where it is
                return
            copy = _apply_edit(copy, record, edited)
        if snd is not None and seq not in copied:
            try:
                await snd.send_messages(copy)
            except Exception as exc:
                held.append(msg)  # the original stays where it was; not retried in this run
                report.failed.append((seq, from_sdk(exc).message, tracking_id_of(exc)))
                return
            copied.add(seq)
        try:
            await rcv.complete_message(msg)
        except Exception:
            if seq not in report.duplicated:
                report.duplicated.append(seq)  # the copy exists; when the original returns it is completed
            return
        if seq in report.duplicated:
            report.duplicated.remove(seq)
        report.moved += 1


_NOT_SENT = {
    "sequence_number",
    "enqueued_time",
    "state",
    "delivery_count",
    "locked_until",
    "lock_token",
    "time_to_live",
    "scheduled_enqueue_time",
    "dead_letter_reason",
    "dead_letter_error_description",
    "dead_letter_source",
    "entity",
}


def _apply_edit(copy: Any, original: Record, edited: Record) -> Any:
    """Rebuild the copy from an edited record, keeping the resubmission bookkeeping.
    An edited ``body`` wins; otherwise an edited ``body_text`` becomes the body."""
    record = {k: v for k, v in edited.items() if k not in _NOT_SENT}
    if edited.get("body") == original.get("body") and edited.get("body_text") is not None:
        record["body"] = edited["body_text"]
    props = dict(copy.application_properties or {})
    props.update(edited.get("application_properties") or {})
    record["application_properties"] = {k: v for k, v in props.items() if k.lower() not in _DEAD_LETTER_PROPS}
    record["message_id"] = copy.message_id
    return to_message(record)


async def _release(rcv: Any, msg: Any) -> None:
    """Give a lock back without counting a delivery (AMQP 'released'); the SDK has no public call."""
    try:
        await rcv._handler.settle_messages_async(msg._delivery_id, msg._delivery_tag, "released")
        msg._settled = True
    except Exception:
        await rcv.abandon_message(msg)


def resubmit(source: str | EntityPath, **kwargs: Any) -> ResubmitReport:
    return run_sync(aresubmit(source, **kwargs))


class _NoSender:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


def _maybe_sender(client: Any, path: EntityPath, wanted: bool) -> Any:
    return open_sender(client, path) if wanted else _NoSender()


def discard(
    source: str | EntityPath,
    *,
    where: Callable[[Record], bool] | None = None,
    limit: int | None = None,
    connection: str | Connection | None = None,
) -> ResubmitReport:
    """Remove the selected messages for good (complete them). Others are released untouched,
    with no delivery counted, as in ``resubmit``. Destructive: the notebook layers ask first."""
    return run_sync(aresubmit(source, where=where, limit=limit, connection=connection, _discard=True))
