"""Processing with a settlement policy: settle only after the work is done.

The handler gets one record and returns what happened:

    Done (or None)  -> complete
    Skip            -> complete (nothing to do, but handled)
    DeadLetter(...) -> the native dead-letter queue, or a chosen destination (copy first, then complete)
    Retry           -> abandon (the delivery count rises; MaxDeliveryCount sends it to the DLQ)
    Stop            -> abandon this message and stop receiving
    an exception    -> the policy's ``on_error`` (abandon by default)

Locks are renewed while handlers run; a lock lost meanwhile is reported, not hidden.
"""

from __future__ import annotations

import concurrent.futures
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .background import background
from .clients import sender as open_sender
from .connection import Connection, resolve
from .entities import EntityPath
from .errors import InvalidInputError
from .receive import LockedBatch, receive
from .resubmit import copy_message


class Done:
    """The work is done: complete."""


class Skip:
    """Nothing to do: complete."""


class Retry:
    """Not now: abandon (the delivery count rises)."""


class Stop:
    """Abandon this message and stop processing."""


@dataclass(frozen=True)
class DeadLetter:
    reason: str
    description: str | None = None


Result = type[Done] | type[Skip] | type[Retry] | type[Stop] | DeadLetter | None


@dataclass(frozen=True)
class Policy:
    on_error: Literal["abandon", "dead_letter"] = "abandon"
    dead_letter_to: str | None = None  # a queue or topic instead of the native DLQ (with fault metadata)


@dataclass
class ProcessReport:
    entity: str
    completed: int = 0
    skipped: int = 0
    dead_lettered: int = 0
    abandoned: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)  # (sequence number, error)
    lock_lost: list[int] = field(default_factory=list)
    stopped: bool = False

    @property
    def handled(self) -> int:
        return self.completed + self.skipped + self.dead_lettered + self.abandoned

    def __repr__(self) -> str:
        return (
            f"ProcessReport({self.entity}: {self.completed} completed, {self.skipped} skipped, "
            f"{self.dead_lettered} dead-lettered, {self.abandoned} abandoned, {len(self.errors)} handler errors, "
            f"{len(self.lock_lost)} locks lost{', stopped' if self.stopped else ''})"
        )


def process(
    entity: str | EntityPath,
    handler: Callable[[dict[str, Any]], Result],
    *,
    policy: Policy | None = None,
    max_messages: int | None = None,
    concurrency: int = 4,
    wait: float = 2.0,
    connection: str | Connection | None = None,
) -> ProcessReport:
    """Receive, run ``handler`` on each record with at most ``concurrency`` at once, and settle each
    message by the policy once its handler has finished. Stops when the entity is empty (for ``wait``
    seconds), after ``max_messages``, or when a handler returns ``Stop``."""
    path = EntityPath.parse(entity)
    if not isinstance(concurrency, int) or concurrency < 1:
        raise InvalidInputError("concurrency must be a positive whole number.")
    policy = policy or Policy()
    conn = resolve(connection)
    report = ProcessReport(str(path))
    with concurrent.futures.ThreadPoolExecutor(concurrency, thread_name_prefix="sbnotebook-handler") as pool:
        while not report.stopped and (max_messages is None or report.handled < max_messages):
            want = concurrency if max_messages is None else min(concurrency, max_messages - report.handled)
            with receive(path, count=want, wait=wait, max_in_flight=concurrency, connection=conn) as batch:
                if len(batch) == 0:
                    break
                records = batch.records
                results = list(pool.map(lambda r: _run(handler, r), records))
                _settle(batch, results, policy, report, conn)
    return report


def _run(handler: Callable[[dict[str, Any]], Result], record: dict[str, Any]) -> Result | BaseException:
    try:
        return handler(record)
    except Exception as exc:  # the policy decides; the error is reported
        exc.__sbnotebook_trace__ = traceback.format_exc(limit=3)  # type: ignore[attr-defined]
        return exc


def _settle(batch: LockedBatch, results: list[Any], policy: Policy, report: ProcessReport, conn: Connection) -> None:
    groups: dict[str, list[int]] = {"complete": [], "skip": [], "abandon": []}
    dead: list[tuple[int, DeadLetter]] = []
    for i, result in enumerate(results):
        seq = int(batch.messages[i].sequence_number or 0)
        if isinstance(result, BaseException):
            report.errors.append((seq, f"{type(result).__name__}: {result}"))
            if policy.on_error == "dead_letter":
                dead.append((i, DeadLetter("HandlerError", f"{type(result).__name__}: {result}"[:1000])))
            else:
                groups["abandon"].append(i)
        elif result is None or result is Done:
            groups["complete"].append(i)
        elif result is Skip:
            groups["skip"].append(i)
        elif isinstance(result, DeadLetter):
            dead.append((i, result))
        elif result is Retry:
            groups["abandon"].append(i)
        elif result is Stop:
            groups["abandon"].append(i)
            report.stopped = True
        else:
            report.errors.append((seq, f"handler returned {result!r}; expected Done, Skip, Retry, Stop or DeadLetter"))
            groups["abandon"].append(i)

    def count(outcomes: list[Any], attr: str) -> None:
        for o in outcomes:
            if o.status == "done":
                setattr(report, attr, getattr(report, attr) + 1)
            elif o.status == "lock_lost":
                report.lock_lost.append(o.sequence_number)

    if groups["complete"]:
        count(batch.complete(groups["complete"]), "completed")
    if groups["skip"]:
        count(batch.complete(groups["skip"]), "skipped")
    if groups["abandon"]:
        count(batch.abandon(groups["abandon"]), "abandoned")
    for i, verdict in dead:
        if policy.dead_letter_to:
            count(_dead_letter_elsewhere(batch, i, verdict, policy.dead_letter_to), "dead_lettered")
        else:
            count(batch.dead_letter(i, reason=verdict.reason, description=verdict.description), "dead_lettered")


def _dead_letter_elsewhere(batch: LockedBatch, i: int, verdict: DeadLetter, destination: str) -> list[Any]:
    """A chosen dead-letter destination: the copy (with fault metadata) first, then complete."""
    target = EntityPath.parse(destination)
    copy = copy_message(batch.messages[i])
    props = dict(copy.application_properties or {})
    props.update(
        {
            "sbnotebook-fault-reason": verdict.reason,
            "sbnotebook-fault-description": verdict.description or "",
            "sbnotebook-fault-source": batch.entity,
        }
    )
    copy.application_properties = props

    async def send_copy() -> None:
        async with batch._client_factory() as client, open_sender(client, target) as snd:
            await snd.send_messages(copy)

    background.run(send_copy())
    return batch.complete(i)
