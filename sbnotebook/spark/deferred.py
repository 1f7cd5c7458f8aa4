"""Deferred messages by sequence number, for the Spark layer's second phase (``settle.py``) and the
streaming source's commit (``streaming.py``): which numbers are still deferred, a locked batch of
them, and one chunk settled (a copy sent first, then the original completed, for resubmit/requeue)."""

from __future__ import annotations

from typing import Any, Literal

from ..core import (
    EntityPath,
    LiveConnection,
    Outcome,
    Report,
    SbError,
    copy_message,
    copy_then_complete,
    default_target,
    receive_deferred,
    scan,
)

Action = Literal["complete", "dead_letter", "resubmit", "requeue"]
ACTIONS = ("complete", "dead_letter", "resubmit", "requeue")
OLD_ACTIONS: dict[str, Action] = {
    "release": "requeue"
}  # kept for one release (docs/names.md): "release" gives a lock back
CHUNK = 200  # sequence numbers per fetch request


def _gone(seq: int) -> Outcome:
    return Outcome(None, seq, "not_found", "no deferred message with this sequence number")


def still_deferred(entity: str, seqs: list[int], conn: LiveConnection, session_id: str | None = None) -> list[int]:
    """Which of the (sorted) numbers are deferred now, found by peeking: no lock, no delivery counted,
    and far cheaper than a fetch that fails for one missing number."""
    wanted = set(seqs)
    found: list[int] = []
    pages = scan(
        entity,
        from_sequence_number=seqs[0],
        before_sequence_number=seqs[-1] + 1,
        states=("deferred",),
        session_id=session_id,
        connection=conn,
    )
    for page in pages:
        found += [int(r["sequence_number"]) for r in page if int(r["sequence_number"]) in wanted]
    return found


def fetch(entity: str, seqs: list[int], conn: LiveConnection, session_id: str | None = None) -> tuple[Any, list[int]]:
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
            part, gone = fetch(entity, half, conn, session_id)
            missing += gone
            if part is not None:
                found += [int(m.sequence_number) for m in part.messages]
                part.close()  # give the locks back; refetched together below
        if not found:
            return None, missing
        return receive_deferred(entity, found, session_id=session_id, connection=conn), missing
    got = {int(m.sequence_number) for m in batch.messages}
    return batch, [s for s in seqs if s not in got]


def settle_chunk(
    entity: str,
    seqs: list[int],
    action: Action,
    conn: LiveConnection,
    opts: dict[str, Any],
    session_id: str | None = None,
) -> Report:
    present = still_deferred(entity, seqs, conn, session_id)
    gone = sorted(set(seqs) - set(present))
    batch, missing = fetch(entity, present, conn, session_id) if present else (None, [])
    out = Report(action, entity)
    out.extend(_gone(s) for s in sorted(missing + gone))
    if batch is None:
        return out
    with batch:
        rows = list(range(len(batch)))
        if action in ("resubmit", "requeue"):
            target = opts.get("target") or str(default_target(EntityPath.parse(entity)))
            copies = [(i, copy_message(m)) for i, m in enumerate(batch.messages)]
            out.merge(copy_then_complete(batch, copies, target))  # the copy first, the original second
        elif action == "dead_letter":
            out.merge(batch.dead_letter(rows, reason=opts.get("reason"), description=opts.get("description")))
        else:
            out.merge(batch.complete(rows))
    return out
