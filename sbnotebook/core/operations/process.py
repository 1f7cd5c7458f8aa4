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
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..connections.registry import ConnectionLike, live
from ..defaults import check_max_in_flight
from ..entities import EntityPath
from ..errors import SbError
from ..outcome import Outcome, Report
from ..rates import Rate, bucket_of
from ..renames import renamed
from .batch import LockedBatch
from .copies import check_target, copy_message, copy_then_complete
from .messages import message_id
from .receive import receive


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
    """Dead-letter this message, with this ``reason`` and ``description`` (to the native dead-letter
    queue, or to the policy's ``dead_letter_to``)."""

    reason: str
    description: str | None = None


Result = type[Done] | type[Skip] | type[Retry] | type[Stop] | DeadLetter | None


# Handlers running at once (threads running the caller's code; each settles what it took): a fact
# of its own, not core.MAX_IN_FLIGHT's sends and settlements.
HANDLERS_IN_FLIGHT = 4


@dataclass(frozen=True)
class Policy:
    """How ``process`` settles what a handler did not decide: a handler that raised is abandoned
    (``on_error="abandon"``: the delivery count rises) or dead-lettered (``"dead_letter"``, reason
    ``HandlerError``); ``dead_letter_to`` sends every dead-lettered message to that queue or topic
    instead of the native dead-letter queue (copy first, then complete)."""

    on_error: Literal["abandon", "dead_letter"] = "abandon"
    dead_letter_to: str | None = None  # a queue or topic instead of the native DLQ (with fault metadata)


@renamed(concurrency="max_in_flight", wait="wait_seconds")
def process(
    entity: str | EntityPath,
    handler: Callable[[dict[str, Any]], Result],
    *,
    policy: Policy | None = None,
    max_messages: int | None = None,
    max_in_flight: int = HANDLERS_IN_FLIGHT,
    wait_seconds: float = 2.0,
    rate: Rate | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Receive, run ``handler`` on each record with at most ``max_in_flight`` at once, and settle each
    message by the policy once its handler has finished. Stops when the entity is empty (for
    ``wait_seconds``), after ``max_messages``, or when a handler returns ``Stop``. ``rate`` (``50/s``,
    ``3000/m``: ``core.parse_rate``): at most that many messages received per second."""
    path = EntityPath.parse(entity)
    check_max_in_flight(max_in_flight)
    bucket = bucket_of(rate)
    policy = policy or Policy()
    conn = live(connection)
    if policy.dead_letter_to:
        check_target(conn, EntityPath.parse(policy.dead_letter_to))  # before any message is settled
    report = Report("process", str(path))
    report.stats.update(handler_errors=0, stopped=False)
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_in_flight, thread_name_prefix="sbnotebook-handler") as pool:
        while not report.stats["stopped"] and (max_messages is None or report.total < max_messages):
            want = max_in_flight if max_messages is None else min(max_in_flight, max_messages - report.total)
            if bucket is not None:  # nothing is held while it waits: the receive follows
                want = min(want, bucket.burst)
                bucket.take_blocking(want)
            try:
                with receive(
                    path, max_messages=want, wait_seconds=wait_seconds, max_in_flight=max_in_flight, connection=conn
                ) as batch:
                    if len(batch) == 0:
                        break
                    records = batch.records
                    results = list(pool.map(lambda r: _run(handler, r), records))
                    _settle(batch, results, policy, report)
            except SbError as exc:
                if report.total == 0:
                    raise  # nothing done yet: the error is the answer
                # Messages were settled already: what happened to each is the answer, and the
                # failure says where it stopped (a batch in hand is given back, its locks lapse).
                report.add(Outcome(None, None, "failed", f"stopped after {report.total} messages: {exc.message}"))
                report.note(f"stopped early: {exc.message}")
                break
            finally:
                report.elapsed = time.perf_counter() - started
    if report.stats["handler_errors"]:
        first = report.stats.get("first_handler_error", "")
        errors = report.stats["handler_errors"]
        report.error(f"{errors} handler error(s), settled by the policy ({policy.on_error}); first: {first}")
    return report


def _run(handler: Callable[[dict[str, Any]], Result], record: dict[str, Any]) -> Result | BaseException:
    try:
        return handler(record)
    except Exception as exc:  # the policy decides; the error is reported
        exc.__sbnotebook_trace__ = traceback.format_exc(limit=3)  # type: ignore[attr-defined]
        return exc


def _settle(batch: LockedBatch, results: list[Any], policy: Policy, report: Report) -> None:
    groups: dict[str, list[int]] = {"complete": [], "skip": [], "abandon": []}
    dead: list[tuple[int, DeadLetter]] = []
    errors: dict[int, str] = {}
    for i, result in enumerate(results):
        if isinstance(result, BaseException):
            errors[i] = f"{type(result).__name__}: {result}"
            report.stats["handler_errors"] += 1
            report.stats.setdefault("first_handler_error", errors[i][:200])
            if policy.on_error == "dead_letter":
                dead.append((i, DeadLetter("HandlerError", errors[i][:1000])))
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
            report.stats["stopped"] = True
        else:
            errors[i] = f"handler returned {result!r}; expected Done, Skip, Retry, Stop or DeadLetter"
            report.stats["handler_errors"] += 1
            report.stats.setdefault("first_handler_error", errors[i][:200])
            groups["abandon"].append(i)

    def record(settled: Report, rename: str | None = None) -> None:
        for o in settled.every():
            error = errors.get(o.index) if o.index is not None else None
            outcome = rename if rename and o.outcome == "completed" else o.outcome
            report.add(replace(o, outcome=outcome, error=o.error or error))
        for n in settled.notes:
            report.note(n)

    if groups["complete"]:
        record(batch.complete(groups["complete"]))
    if groups["skip"]:
        record(batch.complete(groups["skip"]), "skipped")
    if groups["abandon"]:
        record(batch.abandon(groups["abandon"]))
    for i, verdict in dead:
        if policy.dead_letter_to:
            try:
                record(_dead_letter_elsewhere(batch, i, verdict, policy.dead_letter_to), "dead_lettered")
            except SbError as exc:  # no copy sent, the original untouched: reported, the others go on
                msg = batch.messages[i]
                report.add(
                    Outcome(message_id(msg), int(msg.sequence_number or 0), "failed",
                            f"not dead-lettered to {policy.dead_letter_to} ({exc.message}): it returns when its"
                            " lock lapses", i, exc.condition, exc.tracking_id, exc.retryable)
                )  # fmt: skip
        else:
            record(batch.dead_letter(i, reason=verdict.reason, description=verdict.description))


def _dead_letter_elsewhere(batch: LockedBatch, i: int, verdict: DeadLetter, destination: str) -> Report:
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
    # A copy not confirmed is reported failed: the original keeps its lock until it lapses, nothing lost.
    return copy_then_complete(batch, [(i, copy)], target)
