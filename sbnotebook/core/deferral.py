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

from .background import background
from .clients import sender as open_sender
from .entities import EntityPath
from .errors import InvalidInputError, from_sdk
from .receive import LockedBatch, SettleOutcome, receive_deferred
from .resubmit import RESUBMIT_COUNT, copy_message

REMINDER_FOR = "sbnotebook-reminder-for"  # sequence number of the deferred message
REMINDER_ENTITY = "sbnotebook-reminder-entity"


def let_lock_lapse(batch: LockedBatch, which: Any = None) -> list[int]:
    """Stop renewing these locks and leave the messages unsettled: Service Bus redelivers them after
    the lock duration with the delivery count raised. Returns the sequence numbers."""
    indexes = batch._indexes(which)
    batch._lapsing.update(indexes)
    return [int(batch.messages[i].sequence_number or 0) for i in indexes]


def wait_then_abandon(batch: LockedBatch, which: Any = None, *, seconds: float) -> Future[list[SettleOutcome]]:
    """Hold the locks (renewed) for ``seconds``, then abandon. Returns at once with a future."""
    if seconds < 0:
        raise InvalidInputError("seconds must be 0 or more.")
    indexes = batch._indexes(which)

    async def later() -> list[SettleOutcome]:
        await asyncio.sleep(seconds)
        return await batch._settle_many("abandon", indexes, {})

    return background.spawn(later())


def defer_with_reminder(
    batch: LockedBatch, which: Any = None, *, remind_at: dt.datetime | dt.timedelta, reminder_entity: str | None = None
) -> list[int]:
    """Defer the messages and schedule one reminder per message (to ``reminder_entity``, default the
    batch's own queue) carrying the deferred sequence number. Returns the deferred sequence numbers."""
    indexes = batch._indexes(which)
    when = dt.datetime.now(dt.UTC) + remind_at if isinstance(remind_at, dt.timedelta) else remind_at
    source = EntityPath.parse(batch.entity)
    target = EntityPath.parse(reminder_entity) if reminder_entity else source.parent
    if target.is_subscription:
        raise InvalidInputError("Reminders go to a queue or topic: name one with reminder_entity=.")
    seqs = [int(batch.messages[i].sequence_number or 0) for i in indexes]
    outcomes = batch.defer(indexes)
    deferred = [o.sequence_number for o in outcomes if o.status == "done"]

    async def remind() -> None:
        from azure.servicebus import ServiceBusMessage

        reminders = [
            ServiceBusMessage(
                f"reminder for deferred message {seq}",
                subject="sbnotebook-reminder",
                application_properties={REMINDER_FOR: seq, REMINDER_ENTITY: str(source)},
            )
            for seq in deferred
        ]
        async with batch._client_factory() as client, open_sender(client, target) as snd:
            await snd.schedule_messages(reminders, when)

    if deferred:
        try:
            background.run(remind())
        except Exception as exc:
            raise from_sdk(exc, entity=str(target)) from None
    return [s for s in seqs if s in deferred]


def is_reminder(record: dict[str, Any]) -> bool:
    return REMINDER_FOR in (record.get("application_properties") or {})


def fetch_reminded(record: dict[str, Any], *, connection: Any = None) -> LockedBatch:
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
) -> list[SettleOutcome]:
    """Send a scheduled clone (resubmit count + 1) for ``now + delay``, then complete the original.
    A message already resubmitted ``max_resubmits`` times is dead-lettered (``MaxResubmitsExceeded``)."""
    indexes = batch._indexes(which)
    destination = EntityPath.parse(target) if target else EntityPath.parse(batch.entity).parent
    if destination.is_subscription:
        raise InvalidInputError("Name a queue or topic as target= for resubmissions from a subscription.")
    when = dt.datetime.now(dt.UTC) + delay
    give_up: list[int] = []
    retry: list[int] = []
    for i in indexes:
        props = {
            (k.decode() if isinstance(k, bytes) else k): v
            for k, v in (batch.messages[i].application_properties or {}).items()
        }
        (give_up if int(props.get(RESUBMIT_COUNT, 0)) >= max_resubmits else retry).append(i)
    outcomes: list[SettleOutcome] = []
    if give_up:
        outcomes += batch.dead_letter(
            give_up, reason="MaxResubmitsExceeded", description=f"resubmitted {max_resubmits} times"
        )

    async def clone_then_complete() -> list[SettleOutcome]:
        copies = [copy_message(batch.messages[i]) for i in retry]
        async with batch._client_factory() as client, open_sender(client, destination) as snd:
            await snd.schedule_messages(copies, when)  # the copy first ...
        return await batch._settle_many("complete", retry, {})  # ... the original second

    if retry:
        outcomes += background.run(clone_then_complete())
    return outcomes
