"""The brake of a resubmit or a copy: what happens downstream, read while it runs, stops it.

A ``Brake`` is a value, checked when made. Every ``watch_interval`` seconds the watch reads the
runtime counts of the watched entities through the administration API (the emulator serves it too):
by default the target, and for a topic each of its subscriptions. ``stop_if_dead_letters``: the run
stops once that many more messages are in their dead-letter queues than when it began (the copies
coming back: the fix did not work). ``stop_if_active``: it stops once a watched entity's backlog
(its active messages) passes that many (a consumer that is not keeping up). A stop is the run's own:
it takes no more messages, ends each batch in hand (copies confirmed, then originals completed) or
gives it back whole, and its Report says what it moved, what came back, and that ``resume=True``
moves the rest (``resubmit/api.py``; a copy: ``copy/run.py``, which takes no more
from its source and has each copy in the pipeline confirmed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..connections.live import LiveConnection
from ..defaults import check_seconds, check_whole_number
from ..entities import EntityPath
from ..errors import InvalidInputError, SbError
from ..operations.counts import admin_call, counts
from ..outcome import Report

WATCH_INTERVAL = 1.0
"""Seconds between two readings of the watched counts unless told otherwise (``watch_interval=``)."""

BRAKED = "stopped by the brake"  # how a braked run's Report error begins (``braked``)


def braked(report: Report) -> bool:
    """Whether the Report is of a run the brake stopped (its error says why and how to go on)."""
    return any(e.startswith(f"{BRAKED}:") for e in report.errors)


@dataclass(frozen=True)
class Brake:
    """What stops a resubmit or a copy on its own (``brake=Brake(stop_if_dead_letters=50)``): once
    ``stop_if_dead_letters`` more are in the watched dead-letter queues than when it began, or once
    a watched backlog passes ``stop_if_active``; ``watch`` the entities (one name or several; none:
    the target, a topic's subscriptions), read every ``watch_interval`` seconds. Checked when made:
    a brake stops on one of the two at least."""

    stop_if_dead_letters: int | None = None
    stop_if_active: int | None = None
    watch: Sequence[str] = ()  # kept as a tuple (one name given: a tuple of it)
    watch_interval: float = WATCH_INTERVAL

    def __post_init__(self) -> None:
        for name in ("stop_if_dead_letters", "stop_if_active"):
            if getattr(self, name) is not None:
                check_whole_number(getattr(self, name), name, minimum=0)
        if self.stop_if_dead_letters is None and self.stop_if_active is None:
            raise InvalidInputError(
                "A Brake stops on stop_if_dead_letters= or stop_if_active=: give one (watch= only says where it looks)."
            )
        watch = self.watch
        object.__setattr__(self, "watch", (watch,) if isinstance(watch, str) else tuple(watch or ()))
        object.__setattr__(self, "watch_interval", check_seconds(self.watch_interval, "watch_interval"))


# The keywords a Brake was given as before it was a value; taken for one release (renames.gathered).
OLD_KEYWORDS = ("stop_if_dead_letters", "stop_if_active", "watch", "watch_interval")


def brake_of(
    brake: Brake | None,
    stop_if_dead_letters: int | None = None,
    stop_if_active: int | None = None,
    watch: str | Sequence[str] | None = None,
    watch_interval: float = WATCH_INTERVAL,
) -> Brake | None:
    """The brake the old keywords ask for (None: none of them but ``watch_interval``, checked).
    ``renames.gathered`` calls it with ``brake`` None: it refuses an old keyword beside a Brake."""
    if stop_if_dead_letters is None and stop_if_active is None and not watch:
        check_seconds(watch_interval, "watch_interval")
        return brake
    return Brake(stop_if_dead_letters, stop_if_active, watch or (), watch_interval)


def check_brake(brake: object) -> Brake | None:
    if brake is not None and not isinstance(brake, Brake):
        raise InvalidInputError(f"brake must be a Brake (core.Brake(stop_if_dead_letters=N)), not {brake!r}.")
    return brake


def watched_entities(conn: LiveConnection, watch: Sequence[str], target: EntityPath) -> list[str]:
    """The queues and subscriptions a brake (or a canary) reads: those named (a topic: its
    subscriptions), or the target. Blocking (the administration API): called off the loop."""
    names = [str(EntityPath.parse(w).parent) for w in watch] or [str(target.parent)]
    topics = {t.lower() for t in admin_call(conn, lambda admin: [t.name for t in admin.list_topics()])}
    out: list[str] = []
    for name in names:
        if name.lower() in topics:
            out += [f"{name}/subscriptions/{s}" for s in _subscriptions(conn, name)]
        else:
            out.append(name)
    return out


def _subscriptions(conn: LiveConnection, topic: str) -> list[str]:
    return admin_call(conn, lambda admin: [str(s.name) for s in admin.list_subscriptions(topic)], topic)


@dataclass
class Reading:
    """The watched counts at one moment: dead letters summed, and the largest backlog."""

    dead_letters: int
    active: int


def read(conn: LiveConnection, entities: list[str]) -> Reading:
    """One reading of the watched entities (blocking: the administration API)."""
    found = [counts(e, connection=conn) for e in entities]
    return Reading(sum(c.dead_letter for c in found), max((c.active for c in found), default=0))


class Watch:
    """The brake on one run: its first reading at the start, then one every interval until it
    fires (``why`` says why) or the run ends (the task is cancelled). ``sleep`` waits the interval
    between two readings: a test replaces it to count the readings, not to race the clock."""

    sleep = staticmethod(asyncio.sleep)

    def __init__(self, conn: LiveConnection, brake: Brake, entities: list[str], start: Reading) -> None:
        self.conn, self.brake, self.entities, self.start = conn, brake, entities, start
        self.last = start
        self.why: str | None = None
        # What the run has taken from the watched dead-letter queues (its source is one of them: a
        # queue's DLQ resubmitted to the queue), so what came back is not hidden by what left.
        self.taken: Callable[[], int] = lambda: 0

    @property
    def came_back(self) -> int:
        """Messages that arrived in the watched dead-letter queues since the start (at the last reading):
        their count now, less at the start, plus what the run took from them."""
        return max(0, self.last.dead_letters - self.start.dead_letters + self.taken())

    def fired(self, reading: Reading) -> str | None:
        """Why the run stops at ``reading``, or None."""
        self.last = reading
        where = ", ".join(self.entities)
        limit, backlog = self.brake.stop_if_dead_letters, self.brake.stop_if_active
        if limit is not None and self.came_back >= limit:
            return f"{self.came_back} came back to the dead-letter queues of {where} (stop_if_dead_letters={limit})"
        if backlog is not None and reading.active > backlog:
            return f"a backlog of {reading.active} in {where} (stop_if_active={backlog})"
        return None

    async def watch(self, stop: Callable[[], None]) -> None:
        """Read every interval; once the brake fires, set ``why`` and call ``stop``. A reading that
        fails stops the run too: a brake that cannot see is not run past."""
        while self.why is None:
            await self.sleep(self.brake.watch_interval)
            try:
                self.why = self.fired(await asyncio.to_thread(read, self.conn, self.entities))
            except SbError as exc:
                self.why = f"the watch could not read the counts of {', '.join(self.entities)} ({exc.message})"
        stop()

    async def counted(self, report: Report) -> None:
        """What came back, read once more now, in ``report.stats["came_back"]`` (a run that ended
        unbraked too: a glob's copy counts it across its entities, ``copy/many_stops.py``)."""
        self.last = await asyncio.to_thread(read, self.conn, self.entities)
        report.stats.update(came_back=self.came_back)

    async def said(self, report: Report, moved: int, src: EntityPath | str, *, copied: bool = False) -> None:
        """The Report of a run the brake stopped: why, what it moved (a copy: copied), what came
        back (read once more now), and how to go on. An error: the run is not done (its record stays
        for ``resume=True``)."""
        await self.counted(report)
        done, again = ("copied", _COPY_AGAIN) if copied else ("moved", _RESUBMIT_AGAIN)
        report.error(
            f"{BRAKED}: {self.why}; {moved} {done}, {self.came_back} came back; what is left is still in {src}: {again}"
        )


_RESUBMIT_AGAIN = "resubmit again with resume=True to move it"
_COPY_AGAIN = "the same copy again (resume=True) copies it"


async def started(conn: LiveConnection, brake: Brake, target: EntityPath) -> Watch:
    """The watch of a run, its entities resolved and its first reading taken (before anything moves)."""
    entities = await asyncio.to_thread(watched_entities, conn, brake.watch, target)
    return Watch(conn, brake, entities, await asyncio.to_thread(read, conn, entities))
