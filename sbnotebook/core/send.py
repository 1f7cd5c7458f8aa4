"""Settled, concurrency-limited sends.

Every send's outcome is awaited and reported; at most ``max_in_flight`` operations are
outstanding, so memory stays bounded whatever the input size (input is consumed lazily);
messages are packed into batches under the entity's size limit and batches are pipelined.
Retryable failures (server busy, timeouts, connection loss) are retried with exponential
backoff and jitter; the rest are reported at once with the broker's condition and tracking id.
Nothing is fire-and-forget.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import logging
import random
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .entities import EntityPath
from .errors import InvalidInputError, SbError, condition_of, from_sdk, is_connection_lost, is_retryable, tracking_id_of
from .live import ConnectionLike, LiveConnection, live
from .outcome import Outcome, Report
from .records import RECORD_KIND, SENDABLE_FIELDS

log = logging.getLogger("sbnotebook.send")
DEFAULT_MAX_IN_FLIGHT = 10
MAX_BATCH_MESSAGES = 500  # keeps progress fine-grained and a slow input from holding a batch open
CANCEL_CHUNK = 100  # sequence numbers per cancel-scheduled request


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter: delay = min(max_delay, base_delay * 2**(try-1)) * (1 +- jitter)."""

    attempts: int = 5
    base_delay: float = 0.4
    max_delay: float = 10.0
    jitter: float = 0.3

    def delay(self, attempt: int) -> float:
        core = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return max(0.0, core * (1 + random.uniform(-self.jitter, self.jitter)))


# ------------------------------------------------------------------ input


def to_message(item: Any) -> Any:
    """Anything a user may hand us -> a ServiceBusMessage.

    str/bytes become the body; a dict with a ``body`` key is a record (the schema's fields
    are applied); any other dict, list or number is sent as JSON.
    """
    from azure.servicebus import ServiceBusMessage
    from azure.servicebus.amqp import AmqpAnnotatedMessage

    if isinstance(item, (ServiceBusMessage, AmqpAnnotatedMessage)):
        return item
    if isinstance(item, (str, bytes, bytearray)):
        return ServiceBusMessage(bytes(item) if isinstance(item, bytearray) else item)
    if isinstance(item, dict):
        if "body" in item or "body_base64" in item:
            return _from_record(item)
        return ServiceBusMessage(_json(item), content_type="application/json")
    if item is None:
        raise InvalidInputError("Cannot send None: give a body (str, bytes), a record or a JSON value.")
    return ServiceBusMessage(_json(item), content_type="application/json")


def _json(value: Any) -> str:
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"Cannot encode {type(value).__name__} as JSON: {exc}") from None


# The record's sendable string fields (the rest are applied one by one below).
_RECORD_KEYS = tuple(f for f in SENDABLE_FIELDS if RECORD_KIND[f] == "string")


def _from_record(record: dict[str, Any]) -> Any:
    from azure.servicebus import ServiceBusMessage

    body = record.get("body")
    if body is None or (isinstance(body, float) and body != body):  # NaN from pandas
        text = record.get("body_text")
        encoded = record.get("body_base64")  # binary bodies in JSON exports
        if isinstance(encoded, str):
            body = base64.b64decode(encoded)
        elif text is None or (isinstance(text, float) and text != text):
            raise InvalidInputError("A record needs a body (bytes or str).")
        else:
            body = text
    if not isinstance(body, (str, bytes, bytearray, memoryview)):
        body = _json(body)
    kwargs: dict[str, Any] = {}
    for key in _RECORD_KEYS:
        value = record.get(key)
        if value is not None and value == value:  # skip None and NaN
            kwargs[key] = str(value)
    ttl = record.get("time_to_live")
    if ttl is not None and ttl == ttl:
        kwargs["time_to_live"] = ttl if isinstance(ttl, dt.timedelta) else dt.timedelta(seconds=float(ttl))
    scheduled = record.get("scheduled_enqueue_time")
    if scheduled is not None and scheduled == scheduled:
        kwargs["scheduled_enqueue_time_utc"] = _as_datetime(scheduled)
    props = record.get("application_properties")
    if isinstance(props, dict) and props:
        kwargs["application_properties"] = {str(k): v for k, v in props.items()}
    return ServiceBusMessage(bytes(body) if isinstance(body, (bytearray, memoryview)) else body, **kwargs)


def _as_datetime(value: Any) -> dt.datetime:
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if not isinstance(value, dt.datetime):
        raise InvalidInputError(f"{value!r} is not a date and time")
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def iter_input(messages: Any) -> Iterator[Any]:
    """Lazily yield items from lists, generators, pandas DataFrames or a single item."""
    if hasattr(messages, "to_dict") and hasattr(messages, "columns"):  # a DataFrame, row by row
        columns = list(messages.columns)
        for row in messages.itertuples(index=False, name=None):
            yield dict(zip(columns, row, strict=True))
        return
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Iterable):
        yield messages
        return
    yield from messages


# --------------------------------------------------------------- pipeline


@dataclass
class _Unit:
    items: list[tuple[int, Any]]  # (input position, message)
    payload: Any  # a ServiceBusMessageBatch or one message


def _failure(index: int, msg: Any, error: str, condition: str | None = None, **kw: Any) -> Outcome:
    return Outcome(_message_id(msg), None, "failed", error, index, condition, **kw)


async def _units(
    sender: Any,
    messages: Any,
    batch: bool,
    report: Report,
    schedule_at: dt.datetime | None,
    taken: list[tuple[int, Any]],
) -> AsyncGenerator[_Unit, None]:
    """The input packed into sends. ``taken`` holds what was taken from the input and not yet handed
    out as a unit: if packing fails for good, the caller reports those messages failed."""
    from azure.servicebus.exceptions import MessageSizeExceededError

    current: Any = None
    items = taken
    for index, raw in enumerate(iter_input(messages)):
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
            items.append((index, msg))  # taken before the batch exists: reported if it cannot be made
            current = await sender.create_message_batch()
            items.pop()
        try:
            current.add_message(msg)
            items.append((index, msg))
        except (MessageSizeExceededError, ValueError):
            if items:
                unit = _Unit(list(items), current)
                items.clear()
                yield unit
            items.append((index, msg))
            current = await sender.create_message_batch()
            items.pop()
            try:
                current.add_message(msg)
                items.append((index, msg))
            except (MessageSizeExceededError, ValueError):
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
        if len(items) >= MAX_BATCH_MESSAGES:
            unit = _Unit(list(items), current)
            current = None
            items.clear()
            yield unit
    if items:
        unit = _Unit(list(items), current)
        items.clear()
        yield unit


def _message_id(msg: Any) -> str | None:
    mid = getattr(msg, "message_id", None)
    return str(mid) if mid is not None else None


def _check_in_flight(max_in_flight: int) -> None:
    if not isinstance(max_in_flight, int) or max_in_flight < 1:
        raise InvalidInputError(f"max_in_flight must be a positive whole number, not {max_in_flight!r}.")


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
) -> Report:
    report = Report("send", str(path), listener=on_outcome)
    latencies: list[float] = report.stats.setdefault("latencies", [])
    report.stats.update(operations=0, peak_in_flight=0)
    started = time.perf_counter()
    tasks: set[asyncio.Task[None]] = set()
    # One sender (AMQP link) per operation in flight, each with a single operation outstanding:
    # the SDK's async sender can emit transfers out of delivery-id order under concurrent sends,
    # which AMQP forbids. Senders come from the live connection's pool and go back to it, so the
    # next send to this entity starts warm; at most max_in_flight are held, which is the limit.
    pool = conn.pool("sender", path)
    idle: asyncio.Queue[Any] = asyncio.Queue()
    held: list[Any] = []
    opening = 0
    broken: SbError | None = None  # a send failed after every retry: stop, do not make the rest wait it out

    async def open_one() -> None:
        nonlocal opening
        try:
            new, _ = await pool.acquire()
            held.append(new)
            idle.put_nowait(new)
        except Exception as exc:
            conn.info_once(f"send-pool:{path}", "could not open another sender for %s (%s): fewer in flight", path, exc)
            report.note("fewer senders than max_in_flight: opening one failed")
        finally:
            opening -= 1

    async def first_link() -> Any:
        # Nothing is taken from the input yet, so trying again is safe: a connection lost (broker
        # restarted, network gone) means reconnect once, then retry with backoff like a send.
        nonlocal pool
        attempt = 1
        while True:
            try:
                link, _ = await pool.acquire()
                return link
            except Exception as exc:
                if not is_retryable(exc) or attempt >= retry.attempts:
                    raise
                if attempt == 1 and is_connection_lost(exc):
                    await conn.reconnect(why=exc)  # logged there, with why
                    report.note("reconnected: the connection had dropped")
                    pool = conn.pool("sender", path)
                else:
                    log.info("opening a sender for %s failed (try %d): %s", path, attempt, from_sdk(exc).message)
                report.retries += 1
                await asyncio.sleep(retry.delay(attempt))
                attempt += 1

    async def acquire() -> Any:
        # Grow the pool in the background while work continues on the senders already open:
        # opening one takes several round trips, and opening them one after another is slow.
        nonlocal opening
        if idle.empty() and len(held) + opening < max_in_flight:
            opening += 1
            opener = asyncio.create_task(open_one())
            tasks.add(opener)
            opener.add_done_callback(tasks.discard)
        return await idle.get()

    async def run(sender: Any, unit: _Unit) -> None:
        try:
            for attempt in range(1, retry.attempts + 1):
                t0 = time.perf_counter()
                try:
                    await sender.send_messages(unit.payload)
                except Exception as exc:
                    log.debug("send to %s failed (try %d): %r", path, attempt, exc)
                    if is_retryable(exc) and attempt < retry.attempts:
                        report.retries += 1
                        if is_connection_lost(exc):
                            conn.reconnects += 1  # the SDK reopens the sender's link on the next try
                            conn.info_once(
                                f"send-reconnect:{path}", "connection to %s lost while sending; reconnecting", path
                            )
                        await asyncio.sleep(retry.delay(attempt))
                        continue
                    error = from_sdk(exc, entity=str(path))
                    for index, msg in unit.items:
                        report.add(
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
                        nonlocal broken
                        broken = broken or error
                    return
                latencies.append(time.perf_counter() - t0)
                for index, msg in unit.items:
                    report.add(Outcome(_message_id(msg), None, "sent", None, index, attempts=attempt))
                return
        finally:
            idle.put_nowait(sender)
            if progress is not None:
                progress(report)

    taken: list[tuple[int, Any]] = []  # taken from the input, not yet handed to a send
    try:
        try:
            batcher = await first_link()  # sizes batches from the link; also sends
            held.append(batcher)
            idle.put_nowait(batcher)
            units = _units(batcher, messages, batch, report, schedule_at, taken)
            async for unit in units:
                sender = await acquire() if broken is None else None
                if broken is not None:
                    if sender is not None:
                        idle.put_nowait(sender)
                    taken.extend(unit.items)
                    await units.aclose()
                    raise broken
                report.stats["operations"] += 1
                in_flight = len(held) - idle.qsize()
                report.stats["peak_in_flight"] = max(report.stats["peak_in_flight"], in_flight)
                task = asyncio.create_task(run(sender, unit))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            while tasks:
                await asyncio.gather(*list(tasks))
            if broken is not None and taken:
                raise broken
        except Exception as exc:
            # Stopped part-way (the link is gone for good): sends in flight still end with their
            # own outcomes, and what was taken but not sent is reported failed, so the report says
            # per message what happened. With nothing sent or reported yet, the error goes up.
            while tasks:
                await asyncio.gather(*list(tasks), return_exceptions=True)
            if report.total == 0:
                raise
            error = exc if isinstance(exc, SbError) else from_sdk(exc, entity=str(path))
            for index, msg in taken:
                report.add(
                    _failure(index, msg, f"not sent: {error.message}", error.condition, retryable=True, attempts=0)
                )
            report.add(Outcome(None, None, "failed", f"stopped: {error.message}; later input was not sent"))
            report.note("stopped part-way: the connection could not be restored")
            log.info("send to %s stopped part-way: %s", path, error.message)
        finally:
            for s in held:
                pool.release(s)
    except SbError:
        raise
    except Exception as exc:
        raise from_sdk(exc, entity=str(path)) from None
    finally:
        report.elapsed = time.perf_counter() - started
    return report


async def asend(
    entity: str | EntityPath,
    messages: Any,
    *,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    batch: bool = True,
    retry: RetryPolicy | None = None,
    progress: Callable[[Report], None] | None = None,
    schedule_at: dt.datetime | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Send and await every outcome (see the module docstring). Returns one outcome per message.
    ``on_outcome(outcome)`` is called with each outcome as it is known (from the connection's
    thread), also past the Report's detail limit: for work that follows every message (a
    resumable import's progress marker)."""
    path = EntityPath.parse(entity)
    _check_in_flight(max_in_flight)
    conn = live(connection)
    coro = send_all(
        conn,
        path,
        messages,
        max_in_flight=max_in_flight,
        batch=batch,
        retry=retry or RetryPolicy(),
        progress=progress,
        schedule_at=schedule_at,
        on_outcome=on_outcome,
    )
    return await conn.call(coro)


def send(
    entity: str | EntityPath,
    messages: Any,
    *,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    batch: bool = True,
    retry: RetryPolicy | None = None,
    progress: Callable[[Report], None] | None = None,
    schedule_at: dt.datetime | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Send ``messages`` (str, bytes, dicts, records, a DataFrame, any iterable) to a queue or topic
    and wait for every outcome. At most ``max_in_flight`` operations at once; batches packed under
    the entity's size limit; retryable failures retried by ``retry``. ``progress(report)`` is called
    after each operation (from the connection's thread)."""
    conn = live(connection)
    return conn.run(
        asend(
            entity,
            messages,
            max_in_flight=max_in_flight,
            batch=batch,
            retry=retry,
            progress=progress,
            schedule_at=schedule_at,
            connection=conn,
        )
    )


async def _schedule(conn: LiveConnection, path: EntityPath, items: list[Any], when: dt.datetime) -> Report:
    report = Report("schedule", str(path))
    started = time.perf_counter()

    async def op(sender: Any) -> list[int]:
        return list(await sender.schedule_messages(items, when))

    seqs = await conn.call_on(path, conn.with_link("sender", path, op))
    for i, (msg, seq) in enumerate(zip(items, seqs, strict=True)):
        report.add(Outcome(_message_id(msg), int(seq), "scheduled", None, i))
    report.elapsed = time.perf_counter() - started
    return report


def schedule(entity: str | EntityPath, messages: Any, at: dt.datetime, *, connection: ConnectionLike = None) -> Report:
    """Schedule messages to become active at ``at``. The report holds each message's sequence
    number (``[o.sequence_number for o in report]``), which ``cancel_scheduled`` takes."""
    conn = live(connection)
    return conn.run(aschedule(entity, messages, at, connection=conn))


async def aschedule(
    entity: str | EntityPath, messages: Any, at: dt.datetime, *, connection: ConnectionLike = None
) -> Report:
    path = EntityPath.parse(entity)
    when = _as_datetime(at)
    items = [to_message(m) for m in iter_input(messages)]
    conn = live(connection)
    return await conn.call(_schedule(conn, path, items, when))


async def _cancel(
    conn: LiveConnection, path: EntityPath, seqs: list[int], progress: Callable[[Report], None] | None = None
) -> Report:
    report = Report("cancel-scheduled", str(path))
    started = time.perf_counter()
    for start in range(0, len(seqs), CANCEL_CHUNK):
        chunk = seqs[start : start + CANCEL_CHUNK]

        async def op(sender: Any, chunk: list[int] = chunk) -> None:
            await sender.cancel_scheduled_messages(chunk)

        try:
            await conn.with_link("sender", path, op)
        except Exception as exc:
            error = from_sdk(exc, entity=str(path))
            report.extend(
                Outcome(None, s, "failed", error.message, condition=error.condition, tracking_id=error.tracking_id)
                for s in chunk
            )
        else:
            report.extend(Outcome(None, s, "cancelled") for s in chunk)
        if progress is not None:
            progress(report)
    report.elapsed = time.perf_counter() - started
    return report


def _seqs(sequence_numbers: Iterable[int]) -> list[int]:
    seqs = list(sequence_numbers)
    if not all(isinstance(s, int) and s > 0 for s in seqs):
        raise InvalidInputError("Sequence numbers are positive whole numbers.")
    return seqs


def cancel_scheduled(
    entity: str | EntityPath,
    sequence_numbers: Iterable[int],
    *,
    progress: Callable[[Report], None] | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Cancel scheduled messages by sequence number (as ``schedule`` reported them), in requests
    of ``CANCEL_CHUNK``; ``progress(report)`` after each. One outcome per number."""
    conn = live(connection)
    return conn.run(acancel_scheduled(entity, sequence_numbers, progress=progress, connection=conn))


async def acancel_scheduled(
    entity: str | EntityPath,
    sequence_numbers: Iterable[int],
    *,
    progress: Callable[[Report], None] | None = None,
    connection: ConnectionLike = None,
) -> Report:
    path = EntityPath.parse(entity)
    seqs = _seqs(sequence_numbers)
    conn = live(connection)
    return await conn.call(_cancel(conn, path, seqs, progress))
