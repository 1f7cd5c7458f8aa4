"""Second phase of `mode=defer`: settle deferred messages by sequence number, in parallel, after the
downstream work has succeeded. Deferred messages can be fetched by sequence number from any receiver
and settled where they were fetched; the driver does it with `max_in_flight` receivers at once, each
fetching 200 sequence numbers per request (only the two key columns leave the executors)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core import (
    Connection,
    LiveConnection,
    Report,
    check_max_in_flight,
    deprecated,
    live_connection,
    renamed,
)
from .deferred import ACTIONS, CHUNK, OLD_ACTIONS, Action, settle_chunk
from .options import OptionError
from .registered import registered_connection
from .secrets import connection_of, is_ref, parse_ref

# Receivers settling chunks of deferred messages at once, on the driver: a fact of its own, not
# core.MAX_IN_FLIGHT's operations of one call.
RECEIVERS_IN_FLIGHT = 4


@renamed(parallelism="max_in_flight")
def settle(
    df: Any,
    action: Action = "complete",
    *,
    reason: str | None = None,
    description: str | None = None,
    target: str | None = None,
    connection: str | Connection | LiveConnection | None = None,
    max_in_flight: int = RECEIVERS_IN_FLIGHT,
) -> Report:
    """Settle the deferred messages behind a `mode=defer` DataFrame (its entity and sequence_number
    columns): complete, dead-letter (with reason), resubmit a copy (to `target`, default the entity
    itself; copy first, then complete), or requeue (a fresh copy back to active, then complete).

    Runs in this process (the driver, or the Spark Connect client), not in Spark tasks: the two
    columns are collected here and settled in chunks of 200 sequence numbers per request, at most
    `max_in_flight` chunks at once (default 4), each on a receiver of its own. `connection` defaults
    to what `register()` was given. Returns one `Report` (numbers no longer deferred are
    `not_found`, so a rerun is safe); an unknown action or a DataFrame without the two columns is
    an `OptionError` before anything is settled.

    Call it after the downstream work has succeeded. If the job fails before, nothing is lost: the
    messages stay deferred, and `settle(..., action="requeue")` puts them back."""
    if action in OLD_ACTIONS:
        deprecated(f'sbspark.settle(action="{action}")', f'sbspark.settle(action="{OLD_ACTIONS[action]}")')
        action = OLD_ACTIONS[action]
    if action not in ACTIONS:
        raise OptionError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
    check_max_in_flight(max_in_flight)  # refused, never made 1
    missing = {"entity", "sequence_number"} - set(df.columns)
    if missing:
        raise OptionError(
            f"settle() needs the entity and sequence_number columns of a mode=defer read; missing: {missing}"
        )
    if isinstance(connection, str) and is_ref(connection):
        connection = connection_of(parse_ref(connection))
    conn = live_connection(connection if connection is not None else connection_of(registered_connection()))
    wanted: dict[str, set[int]] = {}
    for row in df.select("entity", "sequence_number").collect():  # two columns: small
        wanted.setdefault(str(row.entity), set()).add(int(row.sequence_number))
    opts = {"reason": reason, "description": description, "target": target}
    chunks = [
        (entity, ordered[k : k + CHUNK])
        for entity, seqs in wanted.items()
        for ordered in [sorted(seqs)]
        for k in range(0, len(ordered), CHUNK)
    ]
    report = Report(action, ", ".join(sorted(wanted)) or "(no rows)")
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, min(max_in_flight, len(chunks) or 1))) as pool:
        for part in pool.map(lambda chunk: settle_chunk(chunk[0], chunk[1], action, conn, opts), chunks):
            report.merge(part)
    report.elapsed = time.perf_counter() - started
    return report


def requeue(df: Any, **kwargs: Any) -> Report:
    """Put deferred messages back to active (a fresh copy, then complete the deferred original):
    ``settle(df, "requeue", ...)``. Not "release", which is what Service Bus calls giving a lock back."""
    return settle(df, "requeue", **kwargs)


def release(df: Any, **kwargs: Any) -> Report:
    """The old name of :func:`requeue`, kept for one release (docs/names.md)."""
    deprecated("sbspark.release()", "sbspark.requeue()")
    return requeue(df, **kwargs)
