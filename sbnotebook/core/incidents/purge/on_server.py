"""A purge's first step on an entity of active messages: the server deletes them
(``batch-delete-messages``, what the portal's purge and the .NET and JS SDKs' ``PurgeMessages`` use),
a few requests in flight, no body crossing the network. core/incidents/purge/api.py takes what this leaves the
slower way."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from ...connections.live import LiveConnection
from ...connections.loop import stop_if_cancelled
from ...entities import EntityPath
from ...outcome import Report
from ...sdk.api import ServiceBusError
from ...sdk.failures import from_sdk, is_connection_lost
from ...sdk.management import BATCH_DELETE_MAX, batch_delete, management_handler
from ...sdk.opening import close_now

log = logging.getLogger("sbnotebook.core.incidents.purge.api")  # the purge's logger: one place to turn its lines on

# Batch-delete requests at once (each up to BATCH_DELETE_MAX messages), each on a management link and
# AMQP connection of its own: requests sharing one link wait on each other's reads (each waiter reads
# the socket with the SDK's read timeout, so one answered through another waits that long: four at
# once on one link took ~0.2 s each at 0 ms, one alone 7 ms; tests/core/incidents/test_purge_batch.py).
DELETES_IN_FLIGHT = 16
BATCH_DELETE_STANDARD = 500  # the Standard tier's limit per request
CLOCK_SKEW = dt.timedelta(minutes=5)  # the cut-off is ours + this: a server clock ahead still deletes all


def _deleted(report: Report, n: int, tick: Callable[[], None]) -> None:
    if n:
        report.add_counted("purged", n)  # the server says how many, not which
        tick()


async def delete_on_server(
    conn: LiveConnection,
    path: EntityPath,
    report: Report,
    tick: Callable[[], None],
    before: dt.datetime | None = None,
) -> bool:
    """Delete the active messages (``before``: those enqueued strictly before it) with
    ``batch-delete-messages`` until the server says none are left (status 204),
    ``DELETES_IN_FLIGHT`` requests at a time. Returns False, with a note and a log line, when the
    service refuses it (then nothing was deleted here and the caller receives)."""
    cutoff = before if before is not None else dt.datetime.now(dt.UTC) + CLOCK_SKEW
    handler = management_handler(conn.sdk_client(), path)
    handlers = [handler]  # one per request in flight, closed at the end
    try:
        size = BATCH_DELETE_MAX
        try:
            try:
                first = await batch_delete(handler, size, before=cutoff)
            except ServiceBusError as exc:
                if is_connection_lost(exc):
                    raise
                # Standard namespaces take at most 500 a request (Premium 4,000): ask for that once.
                size = BATCH_DELETE_STANDARD
                first = await batch_delete(handler, size, before=cutoff)
        except ServiceBusError as exc:
            if is_connection_lost(exc):
                raise
            why = from_sdk(exc, entity=str(path)).message
            log.warning("purge of %s: batch delete refused (%s); receiving the messages instead", path, why)
            report.note(f"batch delete refused ({why}): messages were received and deleted instead (slower)")
            return False
        report.stats["batch_delete_requests"] = 1
        _deleted(report, first, tick)
        last = first
        while 0 < last < size:  # fewer than asked: most likely the end, one request to be sure
            stop_if_cancelled()
            last = await batch_delete(handler, size, before=cutoff)
            report.stats["batch_delete_requests"] += 1
            _deleted(report, last, tick)
        if last == 0:
            return True
        done = False

        async def deleter(own: Any) -> None:
            nonlocal done
            while not done:
                stop_if_cancelled()
                n = await batch_delete(own, size, before=cutoff)
                report.stats["batch_delete_requests"] += 1
                if n == 0:
                    done = True  # 204: nothing eligible is left
                    return
                _deleted(report, n, tick)

        handlers += [management_handler(conn.sdk_client(), path) for _ in range(DELETES_IN_FLIGHT - 1)]
        await asyncio.gather(*(deleter(h) for h in handlers))
        return True
    finally:
        await asyncio.gather(*(close_now(h) for h in handlers))
