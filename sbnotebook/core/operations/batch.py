"""A locked batch: messages received in peek-lock with the receiver they came on, their locks renewed
while held, settled on request, and given back on close.

Settlement after processing, never before: nothing here completes a message on its own. Each
settlement returns a :class:`Report` with one outcome per message; a lost lock is one of those
outcomes, never a crash of the whole batch. Many messages are settled (and renewed) in one
management request per 100 lock tokens; one message by its link, one round trip either way.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import html
import logging
import time
from collections.abc import Sequence
from typing import Any, Literal

from ..connections.live import LiveConnection
from ..entities import EntityPath
from ..errors import InvalidInputError, tracking_id_of
from ..outcome import MAX_DETAILS, Outcome, Report
from ..sdk.api import MessageLockLostError, SessionLockLostError
from ..sdk.failures import from_sdk, is_lock_lost
from ..sdk.opening import close_now
from ..sdk.receiver import abandon_with_properties, release, renew_by_tokens, settle_by_tokens
from ..tracing import operation
from ..views.records import SHOWN_FIELDS, to_dataframe, to_record
from .messages import message_id

log = logging.getLogger("sbnotebook.receive")
Mode = Literal["peek_lock", "receive_and_delete"]
Action = Literal["complete", "abandon", "dead_letter", "defer"]
TOKENS_PER_REQUEST = 100  # lock tokens per update-disposition / renew-lock request
MAX_LOCK_SECONDS = 300.0  # Service Bus's longest LockDuration (PT5M)
_DONE = {"complete": "completed", "abandon": "abandoned", "dead_letter": "dead_lettered", "defer": "deferred"}


def _seq(msg: Any) -> int:
    return int(msg.sequence_number or 0)


class LockedBatch:
    """Messages received in peek-lock (or receive-and-delete), with the receiver they came on.

    Use it as a context manager or call ``close()``: closing gives back every lock still held
    (abandon: the messages become available again and, as for any abandoned delivery, count an
    attempt) and returns the receiver to the live connection for the next call.
    """

    def __init__(
        self,
        connection: LiveConnection,
        entity: str,
        mode: Mode,
        receiver: Any,
        messages: list[Any],
        *,
        max_in_flight: int,
        auto_renew: bool,
        max_renewal_seconds: float,
        session: bool = False,
        pooled: bool = True,
        asked_at: dt.datetime | None = None,
    ) -> None:
        self.connection = connection
        self.entity = entity
        # How its lines (repr, reports) name the entity: the notebook sets NAME:ENTITY for a batch of
        # a named connection (prod:orders), since orders alone reads as the default connection's.
        self.label = entity
        self.mode = mode
        self.messages = messages
        self.max_in_flight = max_in_flight
        self.auto_renew = auto_renew
        self.max_renewal_seconds = max_renewal_seconds
        self.session = session
        self._receiver = receiver
        self._pooled = pooled
        self._received_at = time.monotonic()
        self._outcomes: dict[int, Outcome] = {}  # index -> final settlement outcome
        self._lost: set[int] = set()
        self._lapsing: set[int] = set()  # left to expire on purpose: not renewed
        self._closed = receiver is None
        # The locks' length as far as it is known. Not what the first lock has left: the broker
        # locks a batch as it sends it, and a large batch can take the SDK seconds to decode, all of
        # it off every lock (10,050 messages on a loaded machine: 16.8 s of a 30 s lock read from the
        # first). From when the receive was asked (``asked_at``) the locks ran at most their length,
        # give or take a round trip; more when messages came during a wait, which the first renewal
        # mends (``_renew_loop``): at worst it renews early once.
        since = self._most_left() if asked_at is None else self._most_left(asked_at)
        self._lock_duration = min(since, MAX_LOCK_SECONDS)
        self._renewal_took = 0.0  # seconds the last renewal took: the next starts at least twice that early
        self._renewer = connection.spawn(self._renew_loop()) if mode == "peek_lock" and messages else None

    # --------------------------------------------------------------- views

    def __len__(self) -> int:
        return len(self.messages)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self.unsettled)} unsettled"
        return f"<LockedBatch {self.label}: {len(self.messages)} messages ({self.mode.replace('_', '-')}), {state}>"

    def _repr_html_(self) -> str:
        frame = self.to_pandas()
        columns = [c for c in frame.columns if c in SHOWN_FIELDS or c in ("settlement", "seconds_left")]
        table = frame[columns].to_html(max_rows=50, notebook=True)
        return f"<p>{html.escape(repr(self))}</p>{table}"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def unsettled(self) -> list[int]:
        return [i for i in range(len(self.messages)) if i not in self._outcomes and i not in self._lost]

    def locked_until(self, i: int) -> dt.datetime | None:
        if self.session:
            session = getattr(self._receiver, "session", None)
            return getattr(session, "locked_until_utc", None)
        return self.messages[i].locked_until_utc

    def seconds_left(self) -> list[float | None]:
        """Seconds each lock has left (None once settled, lost, or in receive-and-delete mode)."""
        now = dt.datetime.now(dt.UTC)
        return [self._left(i, now) for i in range(len(self.messages))]

    def _most_left(self, since: dt.datetime | None = None) -> float:
        """The most time any lock held has left, now or (``since``) counted from then."""
        at = dt.datetime.now(dt.UTC) if since is None else since
        return max((s for i in range(len(self.messages)) if (s := self._left(i, at)) is not None), default=0.0)

    def lock_gone(self, i: int) -> bool:
        """Whether row ``i``'s lock is known lost or past its time by this machine's clock (as the
        SDK judges it before it settles): settling it would fail, and a copy sent for it would be a
        duplicate once the original comes back."""
        if self.mode != "peek_lock" or i in self._outcomes:
            return False
        return i in self._lost or self._left(i, dt.datetime.now(dt.UTC)) == 0.0

    def _left(self, i: int, now: dt.datetime) -> float | None:
        until = None if self.mode != "peek_lock" or i in self._outcomes or i in self._lost else self.locked_until(i)
        return None if until is None else max(0.0, (until - now).total_seconds())

    @property
    def records(self) -> list[dict[str, Any]]:
        recs = []
        for i, m in enumerate(self.messages):
            rec = to_record(m, self.entity)
            rec["settlement"] = self.status(i)
            recs.append(rec)
        return recs

    def status(self, i: int) -> str:
        """locked / received, or the settlement outcome (completed, lock_lost, ...)."""
        if i in self._outcomes:
            return self._outcomes[i].outcome
        if i in self._lost:
            return "lock_lost"
        return "locked" if self.mode == "peek_lock" else "received"

    def to_pandas(self) -> Any:
        frame = to_dataframe(self.records)
        frame.insert(1, "settlement", [self.status(i) for i in range(len(self.messages))])
        frame.insert(2, "seconds_left", self.seconds_left())
        return frame

    # ---------------------------------------------------------- settlement

    def complete(self, which: Any = None) -> Report:
        """Complete (the work is done: remove the messages)."""
        return self._settle("complete", which)

    def abandon(self, which: Any = None, *, properties: dict[str, Any] | None = None) -> Report:
        """Give the messages back now; their delivery count rises (MaxDeliveryCount -> DLQ)."""
        return self._settle("abandon", which, properties=properties)

    def dead_letter(self, which: Any = None, *, reason: str | None = None, description: str | None = None) -> Report:
        """Move the messages to the dead-letter queue with a reason."""
        return self._settle("dead_letter", which, reason=reason, description=description)

    def defer(self, which: Any = None) -> Report:
        """Set aside; fetch again with ``receive_deferred(entity, sequence_numbers)``."""
        return self._settle("defer", which)

    def renew(self) -> Report:
        """Renew every unsettled lock now (auto-renewal does this on its own)."""
        self._check_open()
        return self.connection.run(self._renew_all())

    def indexes(self, which: Any) -> list[int]:
        """Row positions: None (every unsettled row), an int, or a sequence of ints."""
        if which is None:
            return self.unsettled
        if isinstance(which, int):
            which = [which]
        if hasattr(which, "tolist"):  # a pandas index or numpy array of row positions
            which = which.tolist()
        indexes = list(which)
        for i in indexes:
            if not isinstance(i, int) or not 0 <= i < len(self.messages):
                raise InvalidInputError(f"{i!r} is not a row of this batch (0..{len(self.messages) - 1}).")
        return indexes

    def let_lapse(self, which: Any = None) -> list[int]:
        """Stop renewing these locks (they expire and the messages return). Sequence numbers."""
        indexes = self.indexes(which)
        self._lapsing.update(indexes)
        return [_seq(self.messages[i]) for i in indexes]

    def _check_open(self) -> None:
        if self.mode != "peek_lock":
            raise InvalidInputError("Messages received in receive-and-delete mode are already removed.")
        if self._closed:
            raise InvalidInputError("This batch is closed: its locks were given back.")

    def _settle(self, action: Action, which: Any, **kwargs: Any) -> Report:
        self._check_open()
        with operation("defer" if action == "defer" else "settle", self.connection, self.entity) as span:
            span.attribute("sbnotebook.settlement", action)
            report = self.connection.run(self.settle_async(action, self.indexes(which), **kwargs))
            span.report(report)
        return report

    async def settle_async(self, action: Action, indexes: Sequence[int], **kwargs: Any) -> Report:
        """Settle rows on the connection's loop (for code already running there)."""
        started = time.perf_counter()
        # Every outcome kept (not only counted past MAX_DETAILS): the batch holds each message and
        # its outcome already, and callers read which rows were settled (copy_then_complete, defer).
        report = Report(action.replace("_", "-"), self.label, max_details=max(MAX_DETAILS, len(indexes)))
        slots = asyncio.Semaphore(self.max_in_flight)
        now = dt.datetime.now(dt.UTC)
        todo: list[int] = []
        for i in indexes:
            msg = self.messages[i]
            if i in self._outcomes:
                report.add(Outcome(message_id(msg), _seq(msg), "already_settled", None, i))
            elif i in self._lost:
                report.add(Outcome(message_id(msg), _seq(msg), "lock_lost", "the lock was lost before settlement", i))
            else:
                todo.append(i)
        # Locks known to be valid go in one request per 100 tokens; the rest one by one, which reports
        # each lost lock as such. Abandon with properties has no batch form.
        alive = [i for i in todo if self.session or (self.locked_until(i) or now) > now]
        batchable = len(alive) > 1 and not (action == "abandon" and kwargs.get("properties"))
        if batchable:
            chunks = [alive[k : k + TOKENS_PER_REQUEST] for k in range(0, len(alive), TOKENS_PER_REQUEST)]
            await asyncio.gather(*(self._settle_chunk(action, c, kwargs, slots, report) for c in chunks))

        failures: dict[int, Outcome] = {}
        lost_now: dict[int, Outcome] = {}  # with the service's words (e.g. a session lock that was lost)

        async def one(i: int) -> None:
            async with slots:
                outcome = await self._settle_one(action, i, kwargs)
            if outcome.outcome == "lock_lost":
                self._lost.add(i)
                lost_now[i] = outcome
            elif outcome.ok:
                self._outcomes[i] = outcome
            else:
                failures[i] = outcome

        # One by one: what the batch requests did not settle (a task per message otherwise: 10 us each).
        await asyncio.gather(*(one(i) for i in todo if i not in self._outcomes))
        for i in todo:
            msg = self.messages[i]
            if i in self._outcomes:
                report.add(self._outcomes[i])
            elif i in self._lost:
                lost = Outcome(message_id(msg), _seq(msg), "lock_lost", "the lock expired or was lost", i)
                report.add(lost_now.get(i, lost))
            else:
                report.add(failures[i])
        report.elapsed = time.perf_counter() - started
        return report

    async def _settle_chunk(
        self, action: Action, chunk: list[int], kwargs: dict[str, Any], slots: asyncio.Semaphore, report: Report
    ) -> None:
        """Many locks in one management request. If it fails, nothing was settled: the messages take
        the one-by-one path, which reports each outcome. That fallback is logged and noted."""
        msgs = [self.messages[i] for i in chunk]
        async with slots:
            try:
                await settle_by_tokens(
                    self._receiver, action, msgs, reason=kwargs.get("reason"), description=kwargs.get("description")
                )
            except Exception as exc:
                why = from_sdk(exc).message
                self.connection.info_once(
                    f"settle-fallback:{self.entity}",
                    "settling %d messages on %s in one request failed (%s); settling them one by one",
                    len(chunk),
                    self.label,
                    why,
                )
                report.note(f"one-request settlement failed ({why}); settled one by one")
                return
        for i, m in zip(chunk, msgs, strict=True):
            self._outcomes[i] = Outcome(message_id(m), _seq(m), _DONE[action], None, i)

    async def _settle_one(self, action: Action, i: int, kwargs: dict[str, Any]) -> Outcome:
        msg = self.messages[i]
        r = self._receiver
        try:
            if action == "complete":
                await r.complete_message(msg)
            elif action == "abandon":
                props = kwargs.get("properties")
                if props:
                    await abandon_with_properties(r, msg, props)
                else:
                    await r.abandon_message(msg)
            elif action == "dead_letter":
                await r.dead_letter_message(
                    msg, reason=kwargs.get("reason"), error_description=kwargs.get("description")
                )
            else:
                await r.defer_message(msg)
        except (MessageLockLostError, SessionLockLostError) as exc:
            return Outcome(
                message_id(msg), _seq(msg), "lock_lost", from_sdk(exc).message, i, tracking_id=tracking_id_of(exc)
            )
        except Exception as exc:
            err = from_sdk(exc, entity=self.label)
            return Outcome(
                message_id(msg), _seq(msg), "failed", err.message, i, err.condition, err.tracking_id, err.retryable
            )
        return Outcome(message_id(msg), _seq(msg), _DONE[action], None, i)

    async def release_async(self, indexes: Sequence[int]) -> Report:
        """Give locks back without counting a delivery (AMQP released): for messages the caller
        looked at but did not select."""
        report = Report("release", self.label, max_details=max(MAX_DETAILS, len(indexes)))
        for i in indexes:
            if i in self._outcomes or i in self._lost:
                continue
            msg = self.messages[i]
            try:
                await release(self._receiver, msg)
                self._outcomes[i] = report.add(Outcome(message_id(msg), _seq(msg), "released", None, i))
            except Exception as exc:  # the lock lapses on its own; say so
                report.add(Outcome(message_id(msg), _seq(msg), "failed", from_sdk(exc).message, i))
        return report

    # ------------------------------------------------------------- renewal

    async def _renew_all(self) -> Report:
        started = time.perf_counter()
        report = await self._renew_rows()
        report.elapsed = time.perf_counter() - started
        return report

    async def _renew_rows(self) -> Report:
        todo = [i for i in self.unsettled if i not in self._lapsing]
        report = Report("renew", self.label, max_details=max(MAX_DETAILS, len(todo)))
        if self.session:
            try:
                await self._receiver.session.renew_lock()
                report.extend(
                    Outcome(message_id(self.messages[i]), _seq(self.messages[i]), "renewed", None, i) for i in todo
                )
            except Exception as exc:
                self._lost.update(todo)
                err = from_sdk(exc).message
                report.extend(
                    Outcome(message_id(self.messages[i]), _seq(self.messages[i]), "lock_lost", err, i) for i in todo
                )
            return report
        chunks = [todo[k : k + TOKENS_PER_REQUEST] for k in range(0, len(todo), TOKENS_PER_REQUEST)]
        for result in await asyncio.gather(*(self._renew_chunk(c) for c in chunks)):
            report.extend(result)
        return report

    async def _renew_chunk(self, chunk: list[int]) -> list[Outcome]:

        msgs = [self.messages[i] for i in chunk]
        try:
            await renew_by_tokens(self._receiver, msgs)
            return [Outcome(message_id(m), _seq(m), "renewed", None, i) for i, m in zip(chunk, msgs, strict=True)]
        except Exception as exc:
            if len(chunk) > 1:  # one lost lock fails the request: find it one by one
                self.connection.info_once(
                    f"renew-fallback:{self.entity}",
                    "renewing locks on %s in one request failed (%s); one by one",
                    self.label,
                    from_sdk(exc).message,
                )
                parts = await asyncio.gather(*(self._renew_chunk([i]) for i in chunk))
                return [o for part in parts for o in part]
            i, m = chunk[0], msgs[0]
            if is_lock_lost(exc):
                self._lost.add(i)
                return [Outcome(message_id(m), _seq(m), "lock_lost", from_sdk(exc).message, i)]
            return [
                Outcome(message_id(m), _seq(m), "failed", from_sdk(exc).message, i, tracking_id=tracking_id_of(exc))
            ]

    async def _renew_loop(self) -> None:
        """Renew locks at half their length before they lapse while someone holds the batch, up to
        max_renewal_seconds, and at least twice as long before as the last renewal took (10^4 locks on
        a loaded machine take seconds). The locks are read again when the soonest could need it
        (settling, renewing or losing one only puts that off), not every tick: a resubmit holds twenty
        batches of fifty."""
        due = 0.0  # time.monotonic() when the locks are next read
        while not self._closed:
            await asyncio.sleep(0.25)
            now = time.monotonic()
            if not self.auto_renew or now - self._received_at > self.max_renewal_seconds or now < due:
                continue
            left = [s for i, s in enumerate(self.seconds_left()) if s is not None and i not in self._lapsing]
            renew_at = max(0.2, self._lock_duration / 2, 2 * self._renewal_took)
            if left and min(left) < renew_at:
                try:
                    report = await self._renew_all()
                except Exception as exc:  # the next round tries again; lost locks show in the batch
                    log.info("renewing locks on %s: %s", self.label, from_sdk(exc).message)
                    continue
                self._renewal_took = report.elapsed or 0.0
                # Just renewed, the locks have their length left, less the renewal's time: the best reading of it.
                self._lock_duration = self._most_left() + self._renewal_took
            elif left:
                due = now + min(left) - renew_at

    # --------------------------------------------------------------- close

    def close(self) -> None:
        """Give back every lock still held (abandon) and return the receiver for reuse."""
        if self._closed:
            return
        self._closed = True
        self.connection.run(self.aclose())

    async def aclose(self) -> None:
        """``close()`` on the connection's loop: what is not settled goes back (abandoned)."""
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            # Let go of the task: cancelled, it keeps its CancelledError, whose traceback holds the
            # renew loop's frame, which holds this batch. Kept here, batch and messages would wait
            # for the cyclic garbage collector (a full collection every 2-3 s in a 10^5 resubmit).
            renewer.cancel()
        left = [i for i in self.unsettled if i not in self._lapsing]
        try:
            if left and self.mode == "peek_lock":
                await self.settle_async("abandon", left)
        finally:
            await self._give_back()

    async def _give_back(self) -> None:
        rcv, self._receiver = self._receiver, None
        if rcv is None:
            return
        # A session receiver is closed (that lets the session go); a pooled one goes back.
        if self._pooled:
            await self.connection.pool("receiver", EntityPath.parse(self.entity)).give_back(rcv)
        else:
            await close_now(rcv)

    def __enter__(self) -> LockedBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self._closed = True
            # Never revive a closed connection from here; closing it already released the locks.
            if self.connection.spawn_if_running(self.aclose()) is None:
                log.debug("batch on %s dropped after its connection closed", self.entity)
