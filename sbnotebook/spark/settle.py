"""Second phase of `mode=defer`: settle deferred messages by sequence number, in parallel, after the
downstream work has succeeded. Deferred messages can be fetched by sequence number from any receiver
and settled where they were fetched; the driver does it with `parallelism` receivers at once, each
fetching 200 sequence numbers per request (only the two key columns leave the executors)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core import Connection, EntityPath, SbError, copy_message, receive_deferred, resolve, send
from ..core.clients import receiver
from ..core.resubmit import default_target

Action = Literal["complete", "dead_letter", "resubmit", "release"]
ACTIONS = ("complete", "dead_letter", "resubmit", "release")
CHUNK = 200  # sequence numbers per fetch request


@dataclass
class SettleReport:
    action: str
    done: int = 0
    not_found: int = 0
    failed: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)  # the first 1,000

    @property
    def ok(self) -> bool:
        return self.failed == 0

    def __str__(self) -> str:
        return f"{self.action}: {self.done} done, {self.not_found} not deferred (any more), {self.failed} failed"


def _outcome(entity: str, seq: int, action: str, status: str, error: str | None = None) -> dict[str, Any]:
    return {"entity": entity, "sequence_number": seq, "action": action, "status": status, "error": error}


def _still_deferred(entity: str, seqs: list[int], conn: Connection) -> list[int]:
    """Which of the (sorted) numbers are deferred now, found by peeking: no lock, no delivery counted,
    and far cheaper than a fetch that fails for one missing number."""
    from azure.servicebus import ServiceBusMessageState

    found: list[int] = []
    i = 0
    with conn.client(retry_total=2) as client, receiver(client, EntityPath.parse(entity)) as rcv:
        while i < len(seqs):
            page = rcv.peek_messages(max_message_count=250, sequence_number=seqs[i])
            if not page:
                break
            last = int(page[-1].sequence_number)
            deferred = {int(m.sequence_number) for m in page if m.state == ServiceBusMessageState.DEFERRED}
            while i < len(seqs) and seqs[i] <= last:
                if seqs[i] in deferred:
                    found.append(seqs[i])
                i += 1
    return found


def _fetch(entity: str, seqs: list[int], conn: Connection) -> tuple[Any, list[int]]:
    """A locked batch of the deferred messages that are still there, and the numbers that are not.
    One missing number fails a whole request, so halves are tried until the missing ones are found."""
    try:
        batch = receive_deferred(entity, seqs, connection=conn, retries=0)
    except SbError:
        if len(seqs) == 1:
            return None, seqs
        found: list[int] = []
        missing: list[int] = []
        middle = len(seqs) // 2
        for half in (seqs[:middle], seqs[middle:]):
            part, gone = _fetch(entity, half, conn)
            missing += gone
            if part is not None:
                found += [int(m.sequence_number) for m in part.messages]
                part.close()  # give the locks back; refetched together below
        if not found:
            return None, missing
        return receive_deferred(entity, found, connection=conn), missing
    got = {int(m.sequence_number) for m in batch.messages}
    return batch, [s for s in seqs if s not in got]


def _settle_chunk(
    entity: str, seqs: list[int], action: Action, conn: Connection, opts: dict[str, Any]
) -> list[dict[str, Any]]:
    present = _still_deferred(entity, seqs, conn)
    gone = sorted(set(seqs) - set(present))
    batch, missing = _fetch(entity, present, conn) if present else (None, [])
    missing = sorted(missing + gone)
    out = [_outcome(entity, s, action, "not_found", "no deferred message with this sequence number") for s in missing]
    if batch is None:
        return out
    with batch:
        rows = list(range(len(batch)))
        if action in ("resubmit", "release"):
            target = opts.get("target") or str(default_target(EntityPath.parse(entity)))
            report = send(target, [copy_message(m) for m in batch.messages], connection=conn)  # copy first
            failed = {f.index for f in report.failures}
            errors = {f.index: f.error for f in report.failures}
            for i in sorted(failed):
                out.append(_outcome(entity, int(batch.messages[i].sequence_number), action, "failed", errors[i]))
            rows = [i for i in rows if i not in failed]
            outcomes = batch.complete(rows) if rows else []  # then complete the original
        elif action == "dead_letter":
            outcomes = batch.dead_letter(rows, reason=opts.get("reason"), description=opts.get("description"))
        else:
            outcomes = batch.complete(rows)
    for o in outcomes:
        status = "done" if o.status in ("done", "already_settled") else o.status
        out.append(_outcome(entity, o.sequence_number, action, status, o.error))
    return out


def settle(
    df: Any,
    action: Action = "complete",
    *,
    reason: str | None = None,
    description: str | None = None,
    target: str | None = None,
    connection: str | Connection | None = None,
    parallelism: int = 4,
) -> SettleReport:
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
    conn = resolve(connection) if connection is not None else _registered_connection()
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
    report = SettleReport(action)
    with ThreadPoolExecutor(max_workers=max(1, min(parallelism, len(chunks) or 1))) as pool:
        results = pool.map(lambda chunk: _settle_chunk(chunk[0], chunk[1], action, conn, opts), chunks)
        outcomes = [o for chunk_outcomes in results for o in chunk_outcomes]
    for row in outcomes:
        if row["status"] == "done":
            report.done += 1
        elif row["status"] == "not_found":
            report.not_found += 1
        else:
            report.failed += 1
            if len(report.failures) < 1000:
                report.failures.append(row)
    return report


def release(df: Any, **kwargs: Any) -> SettleReport:
    """Put deferred messages back to active (a fresh copy, then complete the deferred original)."""
    return settle(df, "release", **kwargs)


def _registered_connection() -> Connection:
    from .source import ServiceBusDataSource

    return ServiceBusDataSource.default_connection or resolve()
