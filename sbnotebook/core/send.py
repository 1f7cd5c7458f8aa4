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
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .clients import sender as open_sender
from .connection import Connection, resolve
from .entities import EntityPath
from .errors import InvalidInputError, SbError, condition_of, from_sdk, is_retryable, tracking_id_of
from .sync import run_sync

log = logging.getLogger("sbnotebook.send")
DEFAULT_MAX_IN_FLIGHT = 10
MAX_BATCH_MESSAGES = 500  # keeps progress fine-grained and a slow input from holding a batch open


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


@dataclass(frozen=True)
class SendFailure:
    index: int  # position in the input
    message_id: str | None
    error: str
    condition: str | None
    tracking_id: str | None
    retryable: bool
    attempts: int


@dataclass
class SendReport:
    """What happened to every message. Successes are counted; failures are kept in full."""

    entity: str
    total: int = 0
    sent: int = 0
    operations: int = 0
    retries: int = 0
    elapsed: float = 0.0
    peak_in_flight: int = 0
    failures: list[SendFailure] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)  # seconds per successful operation

    @property
    def failed(self) -> int:
        return len(self.failures)

    @property
    def ok(self) -> bool:
        return not self.failures and self.sent == self.total

    @property
    def rate(self) -> float:
        return self.sent / self.elapsed if self.elapsed > 0 else 0.0

    def outcome(self, index: int) -> str | SendFailure:
        """'sent', or the SendFailure for the message at this input position."""
        if not 0 <= index < self.total:
            raise IndexError(f"no message at position {index} (the input had {self.total})")
        for failure in self.failures:
            if failure.index == index:
                return failure
        return "sent"

    def to_pandas(self) -> Any:
        """One row per message: position, status and, for failures, why."""
        import pandas as pd

        by_index = {f.index: f for f in self.failures}
        rows = []
        for i in range(self.total):
            f = by_index.get(i)
            rows.append(
                {
                    "index": i,
                    "status": "failed" if f else "sent",
                    "message_id": f.message_id if f else None,
                    "condition": f.condition if f else None,
                    "tracking_id": f.tracking_id if f else None,
                    "retryable": f.retryable if f else None,
                    "attempts": f.attempts if f else None,
                    "error": f.error if f else None,
                }
            )
        return pd.DataFrame(rows)

    def raise_for_failures(self) -> None:
        if self.failures:
            first = self.failures[0]
            raise SbError(
                f"{self.failed} of {self.total} messages to {self.entity} failed; first: {first.error}",
                tracking_id=first.tracking_id,
                condition=first.condition,
                retryable=first.retryable,
            )

    def __repr__(self) -> str:
        return (
            f"SendReport({self.entity}: {self.sent} sent, {self.failed} failed of {self.total} "
            f"in {self.elapsed:.2f} s, {self.rate:.0f} msg/s, {self.operations} operations, {self.retries} retries)"
        )


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


_RECORD_KEYS = {
    "message_id",
    "content_type",
    "subject",
    "correlation_id",
    "session_id",
    "partition_key",
    "to",
    "reply_to",
}


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


async def _units(
    sender: Any, messages: Any, batch: bool, report: SendReport, schedule_at: dt.datetime | None
) -> AsyncIterator[_Unit]:
    from azure.servicebus.exceptions import MessageSizeExceededError

    current: Any = None
    items: list[tuple[int, Any]] = []
    for index, raw in enumerate(iter_input(messages)):
        report.total += 1
        try:
            msg = to_message(raw)
        except InvalidInputError as exc:
            report.failures.append(SendFailure(index, None, exc.message, None, None, False, 0))
            continue
        if schedule_at is not None:
            msg.scheduled_enqueue_time_utc = schedule_at
        if not batch:
            yield _Unit([(index, msg)], msg)
            continue
        if current is None:
            current = await sender.create_message_batch()
        try:
            current.add_message(msg)
            items.append((index, msg))
        except (MessageSizeExceededError, ValueError):
            if items:
                yield _Unit(items, current)
            current, items = await sender.create_message_batch(), []
            try:
                current.add_message(msg)
                items.append((index, msg))
            except (MessageSizeExceededError, ValueError):
                limit = current.max_size_in_bytes
                report.failures.append(
                    SendFailure(
                        index,
                        _message_id(msg),
                        f"The message is larger than the entity allows ({limit} bytes).",
                        "amqp:link:message-size-exceeded",
                        None,
                        False,
                        0,
                    )
                )
                continue
        if len(items) >= MAX_BATCH_MESSAGES:
            yield _Unit(items, current)
            current, items = None, []
    if items:
        yield _Unit(items, current)


def _message_id(msg: Any) -> str | None:
    mid = getattr(msg, "message_id", None)
    return str(mid) if mid is not None else None


async def asend(
    entity: str | EntityPath,
    messages: Any,
    *,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    batch: bool = True,
    retry: RetryPolicy | None = None,
    progress: Callable[[SendReport], None] | None = None,
    schedule_at: dt.datetime | None = None,
    connection: str | Connection | None = None,
) -> SendReport:
    """Send and await every outcome. See the module docstring for the guarantees."""
    path = EntityPath.parse(entity)
    if not isinstance(max_in_flight, int) or max_in_flight < 1:
        raise InvalidInputError(f"max_in_flight must be a positive whole number, not {max_in_flight!r}.")
    retry = retry or RetryPolicy()
    conn = resolve(connection)
    report = SendReport(str(path))
    started = time.perf_counter()
    tasks: set[asyncio.Task[None]] = set()
    # One sender (AMQP link) per operation in flight, each with a single operation outstanding:
    # the SDK's async sender can emit transfers out of delivery-id order under concurrent sends,
    # which AMQP forbids. A pool of at most max_in_flight senders is also the in-flight limit.
    idle: asyncio.Queue[Any] = asyncio.Queue()
    opened: list[Any] = []

    opening = 0

    async def open_one(client: Any) -> None:
        nonlocal opening
        new = open_sender(client, path)
        opened.append(new)
        try:
            await new.__aenter__()
            idle.put_nowait(new)
        except Exception:
            opened.remove(new)
            log.debug("could not open an extra sender for %s", path, exc_info=True)
        finally:
            opening -= 1

    async def acquire(client: Any) -> Any:
        # Grow the pool in the background while work continues on the senders already open:
        # opening one takes several round trips, and opening them one after another is slow.
        nonlocal opening
        if idle.empty() and len(opened) + opening < max_in_flight:
            opening += 1
            opener = asyncio.create_task(open_one(client))
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
                        await asyncio.sleep(retry.delay(attempt))
                        continue
                    error = from_sdk(exc, entity=str(path))
                    for index, msg in unit.items:
                        report.failures.append(
                            SendFailure(
                                index,
                                _message_id(msg),
                                error.message,
                                condition_of(exc) or error.condition,
                                tracking_id_of(exc),
                                is_retryable(exc),
                                attempt,
                            )
                        )
                    return
                report.latencies.append(time.perf_counter() - t0)
                report.sent += len(unit.items)
                return
        finally:
            idle.put_nowait(sender)
            if progress is not None:
                progress(report)

    try:
        async with conn.async_client(retry_total=0) as client:
            batcher = open_sender(client, path)  # sizes batches from the link; never sends
            opened.append(batcher)
            await batcher.__aenter__()
            idle.put_nowait(batcher)
            try:
                async for unit in _units(batcher, messages, batch, report, schedule_at):
                    sender = await acquire(client)
                    report.operations += 1
                    in_flight = len(opened) - opening - idle.qsize()
                    report.peak_in_flight = max(report.peak_in_flight, in_flight)
                    task = asyncio.create_task(run(sender, unit))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                if tasks:
                    await asyncio.gather(*list(tasks))
            finally:
                await asyncio.gather(*(s.close() for s in opened), return_exceptions=True)
    except SbError:
        raise
    except Exception as exc:
        raise from_sdk(exc, entity=str(path)) from None
    finally:
        report.elapsed = time.perf_counter() - started
    return report


def send(entity: str | EntityPath, messages: Any, **kwargs: Any) -> SendReport:
    """Blocking form of :func:`asend`, safe to call from a notebook cell."""
    return run_sync(asend(entity, messages, **kwargs))


async def aschedule(
    entity: str | EntityPath, messages: Any, at: dt.datetime, *, connection: str | Connection | None = None
) -> list[int]:
    """Schedule messages for ``at``; returns their sequence numbers (for cancellation)."""
    path = EntityPath.parse(entity)
    when = _as_datetime(at)
    items = [to_message(m) for m in iter_input(messages)]
    conn = resolve(connection)
    try:
        async with conn.async_client() as client, open_sender(client, path) as sender:
            return list(await sender.schedule_messages(items, when))
    except SbError:
        raise
    except Exception as exc:
        raise from_sdk(exc, entity=str(path)) from None


def schedule(entity: str | EntityPath, messages: Any, at: dt.datetime, **kwargs: Any) -> list[int]:
    return run_sync(aschedule(entity, messages, at, **kwargs))


async def acancel_scheduled(
    entity: str | EntityPath, sequence_numbers: Iterable[int], *, connection: str | Connection | None = None
) -> None:
    path = EntityPath.parse(entity)
    seqs = list(sequence_numbers)
    if not all(isinstance(s, int) and s > 0 for s in seqs):
        raise InvalidInputError("Sequence numbers are positive whole numbers.")
    conn = resolve(connection)
    try:
        async with conn.async_client() as client, open_sender(client, path) as sender:
            await sender.cancel_scheduled_messages(seqs)
    except SbError:
        raise
    except Exception as exc:
        raise from_sdk(exc, entity=str(path)) from None


def cancel_scheduled(entity: str | EntityPath, sequence_numbers: Iterable[int], **kwargs: Any) -> None:
    run_sync(acancel_scheduled(entity, sequence_numbers, **kwargs))
