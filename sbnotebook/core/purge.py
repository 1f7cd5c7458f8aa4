"""Purging: explicit, fast, and complete (active, deferred and scheduled messages, or a DLQ).

Destructive by name: the notebook layer asks for confirmation before calling it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from .clients import receiver as open_receiver
from .clients import sender as open_sender
from .connection import Connection, resolve
from .entities import EntityPath
from .errors import SbError, from_sdk
from .sync import run_sync

PURGE_BATCH = 500
PARALLEL_RECEIVERS = 4


@dataclass
class PurgeReport:
    entity: str
    active: int = 0
    deferred: int = 0
    scheduled: int = 0

    @property
    def total(self) -> int:
        return self.active + self.deferred + self.scheduled

    def __repr__(self) -> str:
        return (
            f"PurgeReport({self.entity}: removed {self.active} active, {self.deferred} deferred, "
            f"{self.scheduled} scheduled)"
        )


async def apurge(
    entity: str | EntityPath,
    *,
    include_deferred: bool = True,
    include_scheduled: bool = True,
    connection: str | Connection | None = None,
) -> PurgeReport:
    """Remove every message from an entity (or its DLQ): receive-and-delete with several receivers in
    parallel, then deferred messages by sequence number, then cancel scheduled ones (queues only)."""
    from azure.servicebus import ServiceBusReceiveMode

    path = EntityPath.parse(entity)
    conn = resolve(connection)
    report = PurgeReport(str(path))
    try:
        async with conn.async_client() as client:

            async def drain() -> int:
                removed = 0
                async with open_receiver(
                    client, path, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, prefetch_count=PURGE_BATCH
                ) as rcv:
                    while batch := await rcv.receive_messages(max_message_count=PURGE_BATCH, max_wait_time=1):
                        removed += len(batch)
                return removed

            report.active = sum(await asyncio.gather(*(drain() for _ in range(PARALLEL_RECEIVERS))))
            if include_deferred or include_scheduled:
                deferred, scheduled = await _leftovers(client, path)
                if include_deferred and deferred:
                    async with open_receiver(
                        client, path, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
                    ) as rcv:
                        for start in range(0, len(deferred), 100):
                            got = await rcv.receive_deferred_messages(deferred[start : start + 100])
                            report.deferred += len(got)
                if include_scheduled and scheduled and not path.is_subscription and not path.is_dead_letter:
                    async with open_sender(client, path) as snd:
                        for start in range(0, len(scheduled), 100):
                            await snd.cancel_scheduled_messages(scheduled[start : start + 100])
                            report.scheduled += len(scheduled[start : start + 100])
    except SbError:
        raise
    except Exception as exc:
        raise from_sdk(exc, entity=str(path)) from None
    return report


async def _leftovers(client: Any, path: EntityPath) -> tuple[list[int], list[int]]:
    """Sequence numbers of deferred and scheduled messages (peek shows them with their state)."""
    deferred: list[int] = []
    scheduled: list[int] = []
    async with open_receiver(client, path) as rcv:
        start = 1
        while page := await rcv.peek_messages(max_message_count=250, sequence_number=start):
            for m in page:
                name = m.state.name if m.state is not None else "ACTIVE"
                if name == "DEFERRED":
                    deferred.append(int(m.sequence_number))
                elif name == "SCHEDULED":
                    scheduled.append(int(m.sequence_number))
            start = int(page[-1].sequence_number) + 1
    return deferred, scheduled


def purge(entity: str | EntityPath, **kwargs: Any) -> PurgeReport:
    return run_sync(apurge(entity, **kwargs))
