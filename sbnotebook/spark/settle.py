"""Second phase of `mode=defer`: settle deferred messages by sequence number, in parallel, after the
downstream work has succeeded. Deferred messages can be fetched by sequence number from any receiver
and settled where they were fetched; the driver does it with `parallelism` receivers at once, each
fetching 200 sequence numbers per request (only the two key columns leave the executors)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Literal

from ..core import (
    ConfigurationError,
    Connection,
    EntityPath,
    LiveConnection,
    Outcome,
    Report,
    SbError,
    copy_message,
    default_target,
    live_connection,
    receive_deferred,
    resolve,
    scan,
    send,
)
from .secrets import Source, connection_of, is_ref, parse_ref

Action = Literal["complete", "dead_letter", "resubmit", "release"]
ACTIONS = ("complete", "dead_letter", "resubmit", "release")
CHUNK = 200  # sequence numbers per fetch request


def _gone(seq: int) -> Outcome:
    return Outcome(None, seq, "not_found", "no deferred message with this sequence number")


def _still_deferred(entity: str, seqs: list[int], conn: LiveConnection, session_id: str | None = None) -> list[int]:
    """Which of the (sorted) numbers are deferred now, found by peeking: no lock, no delivery counted,
    and far cheaper than a fetch that fails for one missing number."""
    wanted = set(seqs)
    found: list[int] = []
    pages = scan(entity, start=seqs[0], stop=seqs[-1] + 1, states=("deferred",), session_id=session_id, connection=conn)
    for page in pages:
        found += [int(r["sequence_number"]) for r in page if int(r["sequence_number"]) in wanted]
    return found


def _fetch(entity: str, seqs: list[int], conn: LiveConnection, session_id: str | None = None) -> tuple[Any, list[int]]:
    """A locked batch of the deferred messages that are still there, and the numbers that are not.
    One missing number fails a whole request, so halves are tried until the missing ones are found.
    On a session-enabled entity the numbers belong to one session, named by `session_id`."""
    try:
        batch = receive_deferred(entity, seqs, session_id=session_id, connection=conn)
    except SbError:
        if len(seqs) == 1:
            return None, seqs
        found: list[int] = []
        missing: list[int] = []
        middle = len(seqs) // 2
        for half in (seqs[:middle], seqs[middle:]):
            part, gone = _fetch(entity, half, conn, session_id)
            missing += gone
            if part is not None:
                found += [int(m.sequence_number) for m in part.messages]
                part.close()  # give the locks back; refetched together below
        if not found:
            return None, missing
        return receive_deferred(entity, found, session_id=session_id, connection=conn), missing
    got = {int(m.sequence_number) for m in batch.messages}
    return batch, [s for s in seqs if s not in got]


def _settle_chunk(
    entity: str,
    seqs: list[int],
    action: Action,
    conn: LiveConnection,
    opts: dict[str, Any],
    session_id: str | None = None,
) -> Report:
    present = _still_deferred(entity, seqs, conn, session_id)
    gone = sorted(set(seqs) - set(present))
    batch, missing = _fetch(entity, present, conn, session_id) if present else (None, [])
    out = Report(action, entity)
    out.extend(_gone(s) for s in sorted(missing + gone))
    if batch is None:
        return out
    with batch:
        rows = list(range(len(batch)))
        if action in ("resubmit", "release"):
            target = opts.get("target") or str(default_target(EntityPath.parse(entity)))
            sent = send(target, [copy_message(m) for m in batch.messages], connection=conn)  # copy first
            failed = {f.index for f in sent.failures}
            for f in sent.failures:
                msg = batch.messages[int(f.index or 0)]
                out.add(replace(f, sequence_number=int(msg.sequence_number), index=None))
            rows = [i for i in rows if i not in failed]
            if rows:
                out.merge(batch.complete(rows))  # then complete the original
        elif action == "dead_letter":
            out.merge(batch.dead_letter(rows, reason=opts.get("reason"), description=opts.get("description")))
        else:
            out.merge(batch.complete(rows))
    return out


def settle(
    df: Any,
    action: Action = "complete",
    *,
    reason: str | None = None,
    description: str | None = None,
    target: str | None = None,
    connection: str | Connection | LiveConnection | None = None,
    parallelism: int = 4,
) -> Report:
    """Settle the deferred messages behind a `mode=defer` DataFrame (its entity and sequence_number
    columns): complete, dead-letter (with reason), resubmit a copy (to `target`, default the entity
    itself; copy first, then complete), or release (a fresh copy back to active, then complete).

    Call it after the downstream work has succeeded. If the job fails before, nothing is lost: the
    messages stay deferred, and `settle(..., action="release")` puts them back."""
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
    missing = {"entity", "sequence_number"} - set(df.columns)
    if missing:
        raise ValueError(
            f"settle() needs the entity and sequence_number columns of a mode=defer read; missing: {missing}"
        )
    if isinstance(connection, str) and is_ref(connection):
        connection = connection_of(parse_ref(connection))
    conn = live_connection(connection if connection is not None else connection_of(_registered_connection()))
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
    with ThreadPoolExecutor(max_workers=max(1, min(parallelism, len(chunks) or 1))) as pool:
        for part in pool.map(lambda chunk: _settle_chunk(chunk[0], chunk[1], action, conn, opts), chunks):
            report.merge(part)
    report.elapsed = time.perf_counter() - started
    return report


def release(df: Any, **kwargs: Any) -> Report:
    """Put deferred messages back to active (a fresh copy, then complete the deferred original)."""
    return settle(df, "release", **kwargs)


def _registered_connection() -> Source:
    """What register() resolved in this process, else the environment. Never a new embedded emulator:
    settling against a broker that never saw these messages would report "not found" for all of them."""
    import os

    from ..core import ENV_CONNECTION_STRING, ENV_NAMESPACE
    from .source import ServiceBusDataSource

    if ServiceBusDataSource.default_connection is not None:
        return ServiceBusDataSource.default_connection
    if os.environ.get(ENV_CONNECTION_STRING) or os.environ.get(ENV_NAMESPACE):
        return resolve()
    raise ConfigurationError(
        "settle() does not know where these messages are: pass connection=..., or call "
        "sbnotebook.spark.register(spark, connection) in this notebook first."
    )
