"""A live tail: the messages that arrive in an entity, as they arrive, by peeking.

Nothing is locked, removed or counted: every poll is one peek from the sequence number after the
last one seen (a full page is followed at once by the next), so the tail never takes credit on a
receiver link and consumers get every message as if nobody watched. Sequence numbers only grow, so
"after the last one seen" is "arrived since": at the start the highest number present
(``bounds.snapshot``) marks what was already there, and those messages are not shown unless
``from_sequence_number`` asks for them.

Polls start every ``interval`` seconds (not ``interval`` after the previous answer), so a message
shows at most about ``interval`` plus one round trip after it arrived.

What a peek cannot see: a message that arrives and is taken by a consumer between two polls. And a
dead-letter queue keeps each message's original sequence number, so a message dead-lettered after
others with higher numbers arrives *below* the last one seen: on a dead-letter queue each poll also
reads the dead-letter count (beside the peek: no extra wait) and the tail says how many arrived
that way (at least: the count grew by more than what it saw), which it does not show."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..connections.live import LiveConnection
from ..connections.registry import ConnectionLike, live
from ..entities import EntityPath
from ..errors import InvalidInputError, SbError
from ..times import Timed
from ..views.records import RECORD_FIELDS, to_dataframe
from ..views.search import WhereLike, as_where
from ..views.where import Where
from .bounds import message_count, snapshot
from .scan import PAGE_SIZE, peek_page, sessions_refused

Record = dict[str, Any]
TAIL_INTERVAL = 1.0
"""Seconds between two polls of a tail, by default (``tail(interval=)``)."""
KEEP = 10_000  # records a tail keeps for its DataFrame (the last ones): a tail may run for hours


@dataclass
class Tail(Timed):
    """A running (or finished) tail: iterate it for each poll's new records (a list, maybe empty);
    its counters say what it saw. ``stop()`` (from any thread) ends it after the poll in flight."""

    entity: str
    connection: LiveConnection
    interval: float = TAIL_INTERVAL
    seconds: float | None = None
    where: WhereLike = None
    from_sequence_number: int | None = None
    next_sequence_number: int = 1  # where the next poll peeks from
    started_at: int | None = None  # the first sequence number it would show (after what was there)
    polls: int = 0
    seen: int = 0  # messages that arrived (before ``where``)
    shown: int = 0  # of those, the ones ``where`` kept
    below: int = 0  # dead-letter queue: at least this many arrived below the numbers seen (not shown)
    kept: deque[Record] = field(default_factory=lambda: deque(maxlen=KEEP))
    started: float = field(default_factory=time.monotonic)
    last_arrival: float | None = None
    finished: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def path(self) -> EntityPath:
        """The entity, parsed (once, here)."""
        return self._path

    def __post_init__(self) -> None:
        path = EntityPath.parse(self.entity)
        if not self.interval > 0:
            raise InvalidInputError(f"The poll interval must be more than 0 seconds, not {self.interval!r}.")
        if self.seconds is not None and not self.seconds > 0:
            raise InvalidInputError(f"seconds must be more than 0, not {self.seconds!r}.")
        if self.from_sequence_number is not None and self.from_sequence_number < 0:
            raise InvalidInputError(f"The first sequence number must be 0 or more, not {self.from_sequence_number}.")
        self._path = path
        # What the search could not evaluate is counted there (status() says it; where.py).
        self.matcher: Where | None = as_where(self.where)
        self._matches: Callable[[Record], bool] = self.matcher if self.matcher is not None else lambda r: True
        if self.matcher is not None and isinstance(self.where, str):
            # A misspelled name fails now, not at the first message (which may come in an hour).
            self.matcher.probe(dict.fromkeys(RECORD_FIELDS))

    # ------------------------------------------------------------------ running

    def start(self) -> Tail:
        """Find where the tail begins: after the highest sequence number present now (one or two
        round trips), or at ``from_sequence_number``."""
        if self.from_sequence_number is not None:
            self.next_sequence_number = max(self.from_sequence_number, 1)
        else:
            try:
                bounds = snapshot(self.connection, self._path, 1)
            except SbError as exc:
                raise sessions_refused(self._path, exc, "a tail") or exc from None
            self.next_sequence_number = bounds[1] + 1 if bounds is not None else 1
        self.started_at = self.next_sequence_number
        self.started = time.monotonic()
        return self

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def __iter__(self) -> Iterator[list[Record]]:
        """One list of new records per poll (empty when nothing arrived), until ``seconds`` passed
        or ``stop()``; an interrupt (KeyboardInterrupt) ends it too, raised again. It polls at least
        once however short ``seconds`` (a slow start on a loaded machine must not leave it blind)."""
        if self.started_at is None:
            self.start()
        counting = self._path.is_dead_letter
        pool = ThreadPoolExecutor(1, thread_name_prefix="sbnotebook-tail") if counting else None
        first_count = counted = message_count(self.connection, self._path) if counting else None
        due = time.monotonic()
        try:
            while not self._stop.is_set():
                if self.seconds is not None and self.polls and time.monotonic() - self.started >= self.seconds:
                    return
                asked: Future[int | None] | None = None
                if pool is not None:  # read beside the peek: no wait added
                    asked = pool.submit(message_count, self.connection, self._path)
                arrived = self._poll()
                if asked is not None:
                    # The count read beside the previous peek was answered before this peek began,
                    # so what it counted and this tail has not seen arrived below the last number
                    # seen (removals only make the difference smaller: "at least").
                    if first_count is not None and counted is not None:
                        self.below = max(0, counted - first_count - self.seen)
                    counted = asked.result()
                yield [r for r in arrived if self._keep(r)]
                due += self.interval
                now = time.monotonic()
                if due < now:  # a slow poll: start the next one now, then keep the cadence
                    due = now
                left = due - now
                if self.seconds is not None:
                    left = min(left, max(0.0, self.started + self.seconds - now))
                self._stop.wait(left)
        finally:
            self.finished = time.monotonic()
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)

    def _poll(self) -> list[Record]:
        """Every message from the next sequence number on: one peek, more while pages are full."""
        self.polls += 1
        arrived: list[Record] = []
        while True:
            try:
                page = peek_page(
                    self._path,
                    from_sequence_number=self.next_sequence_number,
                    max_messages=PAGE_SIZE,
                    connection=self.connection,
                )
            except SbError as exc:
                raise sessions_refused(self._path, exc, "a tail") or exc from None
            if page:
                arrived += page
                self.next_sequence_number = int(page[-1]["sequence_number"]) + 1
            if len(page) < PAGE_SIZE or self._stop.is_set():
                break
        if arrived:
            self.seen += len(arrived)
            self.last_arrival = time.monotonic()
        return arrived

    def _keep(self, record: Record) -> bool:
        if not self._matches(record):
            return False
        self.shown += 1
        self.kept.append(record)
        return True

    # ------------------------------------------------------------------ reading

    @property
    def rate(self) -> float:
        """Messages that arrived per second since the start."""
        return self.per_second(self.seen)

    def status(self) -> str:
        """'3 messages in 12.0 s (0.2 msg/s), the last 1 s ago; peeking orders every 1 s from
        sequence number 58 (nothing locked or counted)'."""
        noun = "message" if self.seen == 1 else "messages"
        shown = f"{self.shown:,} of {self.seen:,} {noun} matched" if self.where else f"{self.seen:,} {noun}"
        last = f", the last {time.monotonic() - self.last_arrival:.0f} s ago" if self.last_arrival else ""
        below = (
            f"; the dead-letter count grew by at least {self.below:,} more than that: dead-lettered out of "
            "order, below the numbers seen (a dead-letter queue keeps the original numbers), not shown"
            if self.below
            else ""
        )
        unevaluated = self.matcher.describe() if self.matcher is not None else None
        return (
            f"{shown} in {self.elapsed:.1f} s ({self.rate:,.1f} msg/s){last}; peeking {self.entity} every "
            f"{self.interval:g} s from sequence number {self.next_sequence_number} (nothing locked or counted){below}"
            + (f"; {unevaluated}" if unevaluated else "")
        )

    def to_pandas(self) -> Any:
        """What the tail showed (the last ``KEEP``), in the record schema."""
        return to_dataframe(self.kept)


def tail(
    entity: str | EntityPath,
    *,
    interval: float = TAIL_INTERVAL,
    seconds: float | None = None,
    where: WhereLike = None,
    from_sequence_number: int | None = None,
    connection: ConnectionLike = None,
) -> Tail:
    """A live tail of ``entity`` (a queue, a subscription, or a dead-letter queue), started: where it
    begins is found now (after every message present, or at ``from_sequence_number``). Iterate it
    for each poll's new records, polled every ``interval`` seconds; ``seconds`` ends it, so does
    ``stop()`` or an interrupt. ``where``: only the messages it selects (a search expression, see
    ``compile_where``, or a function of a record). See the module docstring for what it cannot see."""
    conn = live(connection)
    return Tail(
        str(EntityPath.parse(entity)),
        conn,
        interval=interval,
        seconds=seconds,
        where=where,
        from_sequence_number=from_sequence_number,
    ).start()
