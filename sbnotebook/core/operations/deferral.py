"""The four ways to "try later", each by name, on messages of a LockedBatch.

1. ``let_lock_lapse``: stop renewing; the message returns when its lock expires (delivery count + 1).
2. ``wait_then_abandon``: keep the lock for a while, then abandon; does not block the caller.
3. ``defer_with_reminder``: defer, and schedule a reminder message that carries the sequence number;
   ``fetch_reminded`` turns a received reminder back into the deferred message.
4. ``resubmit_scheduled``: send a scheduled clone (resubmit count + 1) and complete the original;
   past ``max_resubmits`` the message is dead-lettered instead.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from concurrent.futures import Future
from typing import Any

from ..connections.registry import ConnectionLike
from ..entities import EntityPath
from ..errors import InvalidInputError, PartlyDoneError, SbError
from ..outcome import Outcome, Report
from ..sdk.api import ServiceBusMessage
from ..sdk.failures import from_sdk
from ..times import When, parse_time
from .batch import LockedBatch
from .copies import RESUBMIT_COUNT, check_target, copy_message, copy_then_complete
from .messages import message_id
from .receive import receive_deferred
from .send import schedule

REMINDER_FOR = "sbnotebook-reminder-for"  # sequence number of the deferred message
REMINDER_ENTITY = "sbnotebook-reminder-entity"


def let_lock_lapse(batch: LockedBatch, which: Any = None) -> list[int]:
    """Stop renewing these locks and leave the messages unsettled: Service Bus redelivers them after
    the lock duration with the delivery count raised. Returns the sequence numbers."""
    return batch.let_lapse(which)


def wait_then_abandon(batch: LockedBatch, which: Any = None, *, seconds: float) -> Future[Report]:
    """Hold the locks (renewed) for ``seconds``, then abandon. Returns at once with a future."""
    if seconds < 0:
        raise InvalidInputError("seconds must be 0 or more.")
    indexes = batch.indexes(which)

    async def later() -> Report:
        await asyncio.sleep(seconds)
        return await batch.settle_async("abandon", indexes)

    return batch.connection.spawn(later())


def defer_with_reminder(
    batch: LockedBatch, which: Any = None, *, remind_at: When, reminder_entity: str | None = None
) -> list[int]:
    """Defer the messages and schedule one reminder per message (to ``reminder_entity``, default the
    batch's own queue) carrying the deferred sequence number. Returns the deferred sequence numbers.

    The reminder target is checked first (a sender link to it is opened): a target that does not
    exist, or refuses this key, raises before anything is deferred. If scheduling still fails after
    the deferral, :class:`~sbnotebook.core.errors.PartlyDoneError` is raised with the deferred sequence
    numbers (its ``sequence_numbers`` and its message): a deferred message is never left without its
    handle (``receive_deferred(entity, exc.sequence_numbers)`` fetches them)."""
    indexes = batch.indexes(which)
    when = parse_time(remind_at, future=True, name="remind_at")  # a timedelta, +2h: that long from now
    source = EntityPath.parse(batch.entity)
    target = EntityPath.parse(reminder_entity) if reminder_entity else source.parent
    if target.is_subscription:
        raise InvalidInputError("Reminders go to a queue or topic: name one with reminder_entity=.")
    conn = batch.connection
    check_target(conn, target)  # before anything is deferred
    seqs = [int(batch.messages[i].sequence_number or 0) for i in indexes]
    outcomes = batch.defer(indexes)
    deferred = {int(o.sequence_number or 0) for o in outcomes.every() if o.outcome == "deferred"}
    done = [s for s in seqs if s in deferred]
    if done:
        reminders = [
            ServiceBusMessage(
                f"reminder for deferred message {seq}",
                subject="sbnotebook-reminder",
                application_properties={REMINDER_FOR: seq, REMINDER_ENTITY: str(source)},
            )
            for seq in done
        ]
        try:
            schedule(target, reminders, when, connection=conn)
        except Exception as exc:
            cause = exc if isinstance(exc, SbError) else from_sdk(exc, entity=str(target))
            raise PartlyDoneError(
                f"{len(done)} message(s) of {source} were deferred, but their reminders could not be scheduled"
                f" to {target} ({cause.message}); fetch them with core.receive_deferred({str(source)!r},"
                " exc.sequence_numbers)",
                sequence_numbers=done,
                cause=cause,
            ) from exc
    return done


def is_reminder(record: dict[str, Any]) -> bool:
    return REMINDER_FOR in (record.get("application_properties") or {})


def fetch_reminded(record: dict[str, Any], *, connection: ConnectionLike = None) -> LockedBatch:
    """The deferred message a reminder record points at, locked for settlement."""
    props = record.get("application_properties") or {}
    if REMINDER_FOR not in props:
        raise InvalidInputError("This record is not a reminder (no sbnotebook-reminder-for property).")
    return receive_deferred(props[REMINDER_ENTITY], [int(props[REMINDER_FOR])], connection=connection)


def resubmit_scheduled(
    batch: LockedBatch,
    which: Any = None,
    *,
    delay: dt.timedelta,
    max_resubmits: int = 5,
    target: str | None = None,
) -> Report:
    """Send a scheduled clone (resubmit count + 1) for ``now + delay``, then complete the original
    (``copy_then_complete``: a clone not confirmed is reported failed and its original left locked).
    A message already resubmitted ``max_resubmits`` times is dead-lettered (``MaxResubmitsExceeded``)."""
    indexes = batch.indexes(which)
    destination = EntityPath.parse(target) if target else EntityPath.parse(batch.entity).parent
    if destination.is_subscription:
        raise InvalidInputError("Name a queue or topic as target= for resubmissions from a subscription.")
    check_target(batch.connection, destination)  # before anything is dead-lettered
    when = dt.datetime.now(dt.UTC) + delay
    give_up: list[int] = []
    retry: list[int] = []
    for i in indexes:
        props = {
            (k.decode() if isinstance(k, bytes) else k): v
            for k, v in (batch.messages[i].application_properties or {}).items()
        }
        (give_up if int(props.get(RESUBMIT_COUNT, 0)) >= max_resubmits else retry).append(i)
    report = Report("resubmit-scheduled", batch.entity, str(destination))
    if give_up:
        report.merge(
            batch.dead_letter(give_up, reason="MaxResubmitsExceeded", description=f"resubmitted {max_resubmits} times")
        )
    if retry:
        copies = [(i, copy_message(batch.messages[i])) for i in retry]
        try:
            report.merge(copy_then_complete(batch, copies, destination, schedule_at=when))
        except SbError as exc:
            if not give_up:
                raise  # nothing changed yet: the error is the answer
            # Raised with no copy sent and no original touched; the dead-lettering above is kept.
            report.extend(
                Outcome(message_id(batch.messages[i]), int(batch.messages[i].sequence_number or 0), "failed",
                        f"not resubmitted ({exc.message}): still locked, it returns when its lock lapses", i,
                        condition=exc.condition, tracking_id=exc.tracking_id, retryable=exc.retryable)
                for i in retry
            )  # fmt: skip
    return report
