"""The send pipeline behind ``send``: the input packed into batches under the entity's size limit,
at most ``max_in_flight`` sends outstanding (one sender link each, from the live connection's pool),
retryable failures retried by a :class:`RetryPolicy`, and one outcome per message.

Every send's outcome is awaited and reported; memory stays bounded whatever the input size (input
is consumed lazily). Retryable failures (server busy, timeouts, connection loss) are retried with
exponential backoff and jitter; the rest are reported at once with the broker's condition and
tracking id. Nothing is fire-and-forget.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

from ..connections.interrupts import interrupted_at, uninterrupted
from ..connections.live import LiveConnection
from ..connections.loop import stop_if_cancelled
from ..entities import EntityPath
from ..errors import InvalidInputError, SbError, condition_of, tracking_id_of
from ..outcome import MAX_DETAILS, Outcome, Report
from ..rates import TokenBucket
from ..sdk.api import MessageSizeExceededError
from ..sdk.failures import from_sdk, is_connection_lost, is_retryable
from ..sdk.messages import add_to_batch, tracing_on
from .messages import iter_input, message_id, to_message

log = logging.getLogger("sbnotebook.send")
MAX_BATCH_MESSAGES = 500  # keeps progress fine-grained and a slow input from holding a batch open
# In an async input: send the batch being filled now, do not wait for more input to fill it (core.copy
# yields it at the end of each page: it reads no more pages until sends free room for them).
FLUSH: Any = object()


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter: delay = min(max_delay, base_delay * 2**(try-1)) * (1 +- jitter)."""

    attempts: int = 5  # tries in all, the first included: a send and up to 4 retries
    base_delay: float = 0.4
    max_delay: float = 10.0
    jitter: float = 0.3

    def delay(self, attempt: int) -> float:
        core = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return max(0.0, core * (1 + random.uniform(-self.jitter, self.jitter)))


@dataclass
class _Unit:
    items: list[tuple[int, Any]]  # (input position, message)
    payload: Any  # a ServiceBusMessageBatch or one message


def _failure(index: int, msg: Any, error: str, condition: str | None = None, **kw: Any) -> Outcome:
    return Outcome(message_id(msg), None, "failed", error, index, condition, **kw)


async def _numbered(messages: Any) -> AsyncGenerator[tuple[int, Any], None]:
    """(input position, item): from an async iterable (``core.copy`` pulls pages of another
    connection as the sends take them), else from ``iter_input``."""
    if hasattr(messages, "__aiter__"):
        index = 0
        async for raw in messages:
            if raw is FLUSH:
                yield -1, FLUSH
                continue
            yield index, raw
            index += 1
        return
    for pair in enumerate(iter_input(messages)):
        yield pair


async def _units(
    sender: Any,
    messages: Any,
    batch: bool,
    report: Report,
    schedule_at: dt.datetime | None,
    taken: list[tuple[int, Any]],
    most: int = MAX_BATCH_MESSAGES,
) -> AsyncGenerator[_Unit, None]:
    """The input packed into sends of at most ``most`` messages (a rate's burst). ``taken`` holds
    what was taken from the input and not yet handed out as a unit: if packing fails for good, the
    caller reports those messages failed."""
    current: Any = None
    items = taken
    tracing = True

    async def new_batch(index: int, msg: Any) -> Any:
        nonlocal tracing
        items.append((index, msg))  # taken before the batch exists: reported if it cannot be made
        made = await sender.create_message_batch()
        items.pop()
        tracing = tracing_on()  # read once per batch, not per message
        return made

    def fits(msg: Any) -> bool:
        try:
            add_to_batch(current, msg, tracing=tracing)
        except (MessageSizeExceededError, ValueError):
            return False
        return True

    async for index, raw in _numbered(messages):
        if raw is FLUSH:
            if items:
                unit = _Unit(list(items), current)
                current = None
                items.clear()
                yield unit
            continue
        try:
            msg = to_message(raw)
        except InvalidInputError as exc:
            report.add(Outcome(None, None, "failed", exc.message, index, retryable=False, attempts=0))
            continue
        if schedule_at is not None:
            msg.scheduled_enqueue_time_utc = schedule_at
        if not batch:
            yield _Unit([(index, msg)], msg)
            continue
        if current is None:
            current = await new_batch(index, msg)
        if not fits(msg):
            if items:
                unit = _Unit(list(items), current)
                items.clear()
                yield unit
            current = await new_batch(index, msg)
            if not fits(msg):
                limit = current.max_size_in_bytes
                report.add(
                    _failure(
                        index,
                        msg,
                        f"The message is larger than the entity allows ({limit} bytes).",
                        "amqp:link:message-size-exceeded",
                        retryable=False,
                        attempts=0,
                    )
                )
                continue
        items.append((index, msg))
        if len(items) >= most:
            unit = _Unit(list(items), current)
            current = None
            items.clear()
            yield unit
    if items:
        unit = _Unit(list(items), current)
        items.clear()
        yield unit


class _Senders:
    """The sender links one ``send_all`` holds, lent by the live connection's pool: one per send in
    flight, each with a single send outstanding (the SDK's async sender can emit transfers out of
    delivery-id order under concurrent sends, which AMQP forbids). They go back to the pool at the
    end, so the next send to this entity starts warm; at most ``max_in_flight`` are held."""

    def __init__(
        self, conn: LiveConnection, path: EntityPath, report: Report, *, max_in_flight: int, retry: RetryPolicy
    ) -> None:
        self.conn, self.path, self.report = conn, path, report
        self.max_in_flight, self.retry = max_in_flight, retry
        self.pool = conn.pool("sender", path)
        self.idle: asyncio.Queue[Any] = asyncio.Queue()
        self.held: list[Any] = []
        self.opening = 0
        self.tasks: set[asyncio.Task[None]] = set()

    async def first(self) -> Any:
        """The first sender. Nothing is taken from the input yet, so trying again is safe: a
        connection lost (broker restarted, network gone) means reconnect once, then retry with
        backoff like a send."""
        attempt = 1
        while True:
            generation = self.conn.generation
            try:
                link, _ = await self.pool.acquire()
                break
            except Exception as exc:
                if not is_retryable(exc) or attempt >= self.retry.attempts:
                    raise
                if attempt == 1 and is_connection_lost(exc):
                    if await self.conn.reconnect_if_stale(generation, why=exc):
                        self.report.note("reconnected: the connection had dropped")
                    else:  # another call reconnected, or this client has never reached the broker
                        self.report.note("the connection had dropped: retried opening a sender")
                    self.pool = self.conn.pool("sender", self.path)
                else:
                    log.info("opening a sender for %s failed (try %d): %s", self.path, attempt, from_sdk(exc).message)
                self.report.retries += 1
                await asyncio.sleep(self.retry.delay(attempt))
                attempt += 1
        self.held.append(link)
        self.idle.put_nowait(link)
        return link

    async def _open_one(self) -> None:
        try:
            new, _ = await self.pool.acquire()
            self.held.append(new)
            self.idle.put_nowait(new)
        except Exception as exc:
            self.conn.info_once(
                f"send-pool:{self.path}", "could not open another sender for %s (%s): fewer in flight", self.path, exc
            )
            self.report.note("fewer senders than max_in_flight: opening one failed")
        finally:
            self.opening -= 1

    async def acquire(self) -> Any:
        """An idle sender. The pool grows in the background while work continues on the senders
        already open: opening one takes several round trips, and one after another is slow."""
        if self.idle.empty() and len(self.held) + self.opening < self.max_in_flight:
            self.opening += 1
            self.spawn(self._open_one())
        return await self.idle.get()

    def spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def wait(self, *, quietly: bool = False) -> None:
        """Until every send started has ended (its outcomes reported); not ``quietly``, the first
        that raised raises here. Cancelled while it waits, it leaves the sends running (a gather
        would cancel them, and a send cut off has no outcome: its copy may be there or not)."""
        while self.tasks:
            done, _ = await asyncio.wait(list(self.tasks), return_when=asyncio.FIRST_EXCEPTION)
            failed = [t.exception() for t in done if not t.cancelled() and t.exception() is not None]
            if failed and not quietly:
                raise failed[0]  # type: ignore[misc]

    @property
    def in_flight(self) -> int:
        return len(self.held) - self.idle.qsize()

    def give_back(self) -> None:
        for s in self.held:
            self.pool.release(s)


class _Sends:
    """The sends of one ``send_all``: each unit sent with retries, its outcomes reported; the first
    failure past every retry of a retryable error stops the rest (``broken``)."""

    def __init__(
        self,
        senders: _Senders,
        report: Report,
        retry: RetryPolicy,
        progress: Callable[[Report], None] | None,
    ) -> None:
        self.senders, self.report, self.retry, self.progress = senders, report, retry, progress
        self.bucket: TokenBucket | None = None  # a rate: each send, its sender in hand, waits for its tokens
        self.latencies: list[float] = report.stats["latencies"]
        self.broken: SbError | None = None  # a send failed after every retry: do not make the rest wait it out

    async def pump(self, units: AsyncGenerator[_Unit, None], taken: list[tuple[int, Any]]) -> None:
        """Start a send for each unit, at most ``max_in_flight`` at once; stop at ``broken``."""
        report = self.report
        async for unit in units:
            sender = None
            try:
                stop_if_cancelled()  # the unit was taken, not sent: as if cancelled in the acquire below
                sender = await self.senders.acquire() if self.broken is None else None
                if self.bucket is not None and sender is not None:  # the tokens last: the send goes as they come
                    await self.bucket.take(len(unit.items))
            except asyncio.CancelledError:
                if sender is not None:
                    self.senders.idle.put_nowait(sender)
                taken.extend(unit.items)  # taken from the input and not sent: said so (send_all)
                raise
            if self.broken is not None:
                if sender is not None:
                    self.senders.idle.put_nowait(sender)
                taken.extend(unit.items)
                await units.aclose()
                raise self.broken
            report.stats["operations"] += 1
            report.stats["peak_in_flight"] = max(report.stats["peak_in_flight"], self.senders.in_flight)
            self.senders.spawn(self.send(sender, unit))
        await self.senders.wait()
        if self.broken is not None and taken:
            raise self.broken

    async def send(self, sender: Any, unit: _Unit) -> None:
        try:
            for attempt in range(1, self.retry.attempts + 1):
                t0 = time.perf_counter()
                try:
                    await sender.send_messages(unit.payload)
                except Exception as exc:
                    if self._again(exc, attempt):
                        await asyncio.sleep(self.retry.delay(attempt))
                        continue
                    self._failed(unit, exc, attempt)
                    return
                self.latencies.append(time.perf_counter() - t0)
                for index, msg in unit.items:
                    self.report.add(Outcome(message_id(msg), None, "sent", None, index, attempts=attempt))
                return
        finally:
            self.senders.idle.put_nowait(sender)
            if self.progress is not None:
                self.progress(self.report)

    def _again(self, exc: Exception, attempt: int) -> bool:
        """Whether to try this send again (a retryable error with tries left)."""
        path = self.senders.path
        log.debug("send to %s failed (try %d): %r", path, attempt, exc)
        if not (is_retryable(exc) and attempt < self.retry.attempts):
            return False
        self.report.retries += 1
        if is_connection_lost(exc):
            conn = self.senders.conn
            conn.reconnects += 1  # the SDK reopens the sender's link on the next try
            conn.info_once(f"send-reconnect:{path}", "connection to %s lost while sending; reconnecting", path)
        return True

    def _failed(self, unit: _Unit, exc: Exception, attempt: int) -> None:
        error = from_sdk(exc, entity=str(self.senders.path))
        for index, msg in unit.items:
            self.report.add(
                _failure(
                    index,
                    msg,
                    error.message,
                    condition_of(exc) or error.condition,
                    tracking_id=tracking_id_of(exc),
                    retryable=is_retryable(exc),
                    attempts=attempt,
                )
            )
        if is_retryable(exc):  # retries exhausted: the rest would wait out the same backoff
            self.broken = self.broken or error


async def send_all(
    conn: LiveConnection,
    path: EntityPath,
    messages: Any,
    *,
    max_in_flight: int,
    batch: bool,
    retry: RetryPolicy,
    progress: Callable[[Report], None] | None,
    schedule_at: dt.datetime | None,
    on_outcome: Callable[[Outcome], None] | None = None,
    max_details: int = MAX_DETAILS,
    rate: float | None = None,
) -> Report:
    """Send ``messages`` and report one outcome per message (see the module docstring); ``rate``:
    at most that many messages per second over the whole send (``rates.TokenBucket``), each send
    at most the bucket's burst.
    ``max_details``: outcomes kept in detail; a caller that reads every outcome (which positions
    were confirmed) passes the input's length (its messages are held already)."""
    report = Report("send", str(path), listener=on_outcome, max_details=max_details)
    report.stats.update(latencies=[], operations=0, peak_in_flight=0)
    started = time.perf_counter()
    senders = _Senders(conn, path, report, max_in_flight=max_in_flight, retry=retry)
    bucket = None if rate is None else TokenBucket(rate)
    sends = _Sends(senders, report, retry, progress)
    sends.bucket = bucket
    taken: list[tuple[int, Any]] = []  # taken from the input, not yet handed to a send
    try:
        try:
            batcher = await senders.first()  # sizes batches from the link; also sends
            most = MAX_BATCH_MESSAGES if bucket is None else min(MAX_BATCH_MESSAGES, bucket.burst)
            await sends.pump(_units(batcher, messages, batch, report, schedule_at, taken, most), taken)
        except asyncio.CancelledError:
            # Interrupted: no more input is taken; each send in flight ends with its own outcome (a
            # copy the broker confirmed is reported sent, so a resumed run does not send it again).
            log.info("send to %s interrupted: ending the sends in flight", path)
            await uninterrupted(senders.wait(quietly=True))
            for index, msg in taken:
                report.add(_failure(index, msg, "not sent: interrupted", retryable=True, attempts=0))
            raise interrupted_at(report) from None
        except Exception as exc:
            await senders.wait(quietly=True)  # sends in flight still end with their own outcomes
            if report.total == 0:
                raise  # nothing sent or reported yet: the error goes up
            _stopped(report, path, taken, exc)
        finally:
            senders.give_back()
    except SbError:
        raise
    except Exception as exc:
        raise from_sdk(exc, entity=str(path)) from None
    finally:
        report.elapsed = time.perf_counter() - started
    return report


def _stopped(report: Report, path: EntityPath, taken: list[tuple[int, Any]], exc: Exception) -> None:
    """Stopped part-way (the link is gone for good): what was taken but not sent is reported
    failed, so the report says per message what happened."""
    error = exc if isinstance(exc, SbError) else from_sdk(exc, entity=str(path))
    for index, msg in taken:
        report.add(_failure(index, msg, f"not sent: {error.message}", error.condition, retryable=True, attempts=0))
    report.add(Outcome(None, None, "failed", f"stopped: {error.message}; later input was not sent"))
    report.note("stopped part-way: the connection could not be restored")
    log.info("send to %s stopped part-way: %s", path, error.message)
