"""A canary before a resubmit or a copy: move K messages, then wait until the consumer downstream has had them,
and say from the broker what became of each before anything more moves.

The copies are found at the target (the entities the brake would watch: ``brake.watched_entities``)
by the id each carries: a resubmit's by the original each names (``sbnotebook-original-message-id``,
or the id itself with ``keep_message_id``), a copy's by its own message id (the ``sent`` outcomes'):
still active there (not yet taken), in its dead-letter queue (dead-lettered
again), or neither (settled: completed or deferred by the consumer). The wait ends when none is
still active, or after ``timeout`` seconds. The run's record stays (``resubmit/progress.py``,
``copy/progress.py``), so ``resume=True`` moves the rest, nothing twice.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from typing import Any

from ..connections.live import LiveConnection
from ..defaults import check_seconds, check_whole_number
from ..entities import EntityPath
from ..errors import InvalidInputError
from ..operations.copies import original_of
from ..operations.scan import scan_records
from ..outcome import Report
from .brake import WATCH_INTERVAL, Brake, watched_entities

CANARY_TIMEOUT = 60.0
"""Seconds a canary waits at most for its copies to be taken, unless told otherwise (``Canary(canary_timeout=)``)."""


@dataclass(frozen=True)
class Canary:
    """A canary (``canary=Canary(20)``): ``size`` moved first, then a wait of at most ``canary_timeout``
    seconds until the consumer downstream has had them, their fate said, and nothing more moved until
    told. Checked when made."""

    size: int
    canary_timeout: float = CANARY_TIMEOUT

    def __post_init__(self) -> None:
        check_whole_number(self.size, "canary")
        object.__setattr__(self, "canary_timeout", check_seconds(self.canary_timeout, "canary_timeout"))


# The keyword a canary's wait was given as before the canary was a value (renames.gathered).
OLD_KEYWORDS = ("canary_timeout",)


def canary_of(canary: int | None, canary_timeout: float | None = None) -> Canary | None:
    """The canary an old call asks for: ``canary=K`` (a count, not a ``Canary``) and ``canary_timeout``.
    ``renames.gathered`` never gives it a ``Canary``: it refuses ``canary_timeout=`` beside one."""
    if canary is None:
        if canary_timeout is not None:
            check_seconds(canary_timeout, "canary_timeout")  # checked, as it was without a canary
        return None
    return Canary(canary, CANARY_TIMEOUT if canary_timeout is None else canary_timeout)


def check_canary(canary: object) -> Canary | None:
    if canary is not None and not isinstance(canary, Canary):
        raise InvalidInputError(f"canary must be a Canary (core.Canary(K)), not {canary!r}.")
    return canary


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

    @classmethod
    def of(cls, report: Report) -> CanaryFate | None:
        """The fate a Report of a canary's run says (``report.stats["canary"]``); None: no canary."""
        found = report.stats.get("canary")
        return None if found is None else cls(**found)

    @classmethod
    def summed(cls, fates: list[CanaryFate]) -> CanaryFate:
        """The fates of several canaries (a glob's, one an entity) as one: each count summed."""
        return cls(*(sum(getattr(f, k) for f in fates) for k in ("moved", "settled", "dead_lettered", "waiting")))

    def said(self, report: Report, after: str) -> None:
        """Written into ``report``: ``stats["canary"]`` (what ``of`` reads) and a note, the fate then
        ``after`` (what moved no more, and how to go on)."""
        report.stats["canary"] = asdict(self)
        report.note(f"{self}{after}")


def _original(record: dict[str, Any]) -> str:
    """The id the original of a resubmitted copy had (a message that is no copy: its own)."""
    original = original_of(record)
    return str(record.get("message_id")) if original is None else original


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
    target: EntityPath,
    report: Report,
    canary: Canary,
    brake: Brake | None,
    *,
    outcome: str = "resubmitted",
    rest: str = "the same call with resume=True moves the rest",
) -> CanaryFate:
    """The fate of the copies ``report`` (a canary's run to ``target``) moved (its ``outcome`` ones:
    resubmitted, or a copy's sent), once none is waiting where the ``brake`` watches (else at the
    target) or the canary's timeout has passed, read every brake's ``watch_interval`` seconds. Said in
    the Report (a note, and ``stats["canary"]``), with ``rest``: how to go on."""
    entities = await asyncio.to_thread(watched_entities, conn, brake.watch if brake else (), target)
    interval = brake.watch_interval if brake else WATCH_INTERVAL
    originals = {str(o.message_id) for o in report.every() if o.outcome == outcome}
    deadline = time.monotonic() + canary.canary_timeout
    while True:
        waiting, dead = await asyncio.to_thread(_where, conn, entities, originals, outcome)
        if waiting == 0 or time.monotonic() >= deadline:
            break
        await asyncio.sleep(interval)
    found = CanaryFate(len(originals), len(originals) - waiting - dead, dead, waiting)
    found.said(report, f"; nothing more moved: {rest}")
    return found
