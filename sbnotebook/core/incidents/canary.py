"""A canary before a resubmit or a copy: move K messages, then wait until the consumer downstream has had them,
and say from the broker what became of each before anything more moves.

The copies are found at the target (the entities the brake would watch: ``brake.watched_entities``)
by the id each carries: a resubmit's by the original each names (``sbnotebook-original-message-id``,
or the id itself with ``keep_message_id``), a copy's by its own message id (the ``sent`` outcomes'):
still active there (not yet taken), in its dead-letter queue (dead-lettered
again), or neither (settled: completed or deferred by the consumer). The wait ends when none is
still active, or after ``timeout`` seconds. The run's record stays (``resubmit/record.py``,
``copy/progress.py``), so ``resume=True`` moves the rest, nothing twice.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from typing import Any

from ..connections.live import LiveConnection
from ..defaults import check_whole_number
from ..entities import EntityPath
from ..errors import InvalidInputError
from ..operations.copies import ORIGINAL_ID
from ..operations.scan import scan_records
from ..outcome import Report

CANARY_TIMEOUT = 60.0
"""Seconds a canary waits at most for its copies to be taken, unless told otherwise (``canary_timeout=``)."""


@dataclass(frozen=True)
class CanaryFate:
    """What became of a canary's copies at the target, read from the broker."""

    moved: int
    settled: int  # taken and settled by the consumer (completed or deferred)
    dead_lettered: int  # in the target's dead-letter queues
    waiting: int  # still active at the target when the wait ended

    def __str__(self) -> str:
        return (
            f"canary: {self.moved} moved; at the target {self.settled} settled, {self.dead_lettered} "
            f"dead-lettered, {self.waiting} not yet taken"
        )


def check_canary(canary: object, timeout: object) -> None:
    if canary is not None:
        check_whole_number(canary, "canary")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise InvalidInputError(f"canary_timeout must be a number of seconds above 0, not {timeout!r}.")


def _original(record: dict[str, Any]) -> str:
    props = record.get("application_properties") or {}
    return str(props.get(ORIGINAL_ID, record.get("message_id")))


def _ids(record: dict[str, Any], outcome: str) -> str:
    """The id by which a canary's copy is known at the target: a resubmit's original, a copy's own."""
    return _original(record) if outcome == "resubmitted" else str(record.get("message_id"))


def _where(conn: LiveConnection, entities: list[str], ids: set[str], outcome: str) -> tuple[int, int]:
    """(still active, dead-lettered) of the copies known by ``ids`` at ``entities`` (blocking: peeks)."""
    waiting = dead = 0
    for entity in entities:
        path = EntityPath.parse(entity)
        waiting += sum(_ids(r, outcome) in ids for r in scan_records(path, states=["active"], connection=conn))
        dead += sum(_ids(r, outcome) in ids for r in scan_records(path.dead_letter, connection=conn))
    return waiting, dead


async def fate(
    conn: LiveConnection,
    entities: list[str],
    report: Report,
    *,
    interval: float,
    timeout: float,
    outcome: str = "resubmitted",
    rest: str = "the same call with resume=True moves the rest",
) -> CanaryFate:
    """The fate of the copies ``report`` (a canary's run) moved (its ``outcome`` ones: resubmitted,
    or a copy's sent), once none is waiting at ``entities`` or ``timeout`` has passed, read every
    ``interval`` seconds. Said in the Report (a note, and ``stats["canary"]``), with ``rest``: how to
    go on."""
    originals = {str(o.message_id) for o in report.every() if o.outcome == outcome}
    deadline = time.monotonic() + timeout
    while True:
        waiting, dead = await asyncio.to_thread(_where, conn, entities, originals, outcome)
        if waiting == 0 or time.monotonic() >= deadline:
            break
        await asyncio.sleep(interval)
    found = CanaryFate(len(originals), len(originals) - waiting - dead, dead, waiting)
    report.stats["canary"] = asdict(found)
    report.note(f"{found}; nothing more moved: {rest}")
    return found
