"""Many entities in one copy: the queues a glob matches (``orders*``, or their dead-letter queues:
``orders*/`` and the dead-letter sub-queue), each copied by ``acopy`` into the entity of the same name in the target
namespace. One Report, with a part per entity; entities the glob does not match are not read.

Every target must exist before anything is copied: those missing are refused by name, or created from
the source's description with ``create=True`` (its properties; forwarding only to entities the target
namespace has). Resumable per entity: each entity's copy keeps its own record (``acopy``), and the
glob's record (beside them, in the copies folder) lists the entities already copied in full, so the
same call again copies only the rest, and of an interrupted entity only what is left.

The brake and the canary (``brake=Brake(...)``, ``canary=Canary(K)``) are one copy's, given to each
entity's ``acopy`` (``copy/many_stops.py``):
each entity's copy watches its own target (or the ``watch`` entities) from its own first reading, and
what came back is counted across the run, so the copy of each entity is given ``stop_if_dead_letters``
less what came back during the copies before it. When the brake stops an entity's copy (or what came
back by the end of one reaches the limit), the glob stops: the entities after it are not begun, the
Report's error names the entity, how many were copied and how many came back, and the same call again
continues from where it stopped (the glob's record and the entity's own: nothing copied twice). A
canary of K copies K in total, from the entities in order (the first not copied in full gives up to
K, the next the rest of K, ...), each entity's canary fate read at its target from the broker, the
run's their sum (``stats["canary"]``); nothing more is copied, and the same call again without
``canary`` copies the rest.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import fnmatch
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...connections.interrupts import answers_interrupts, before_anything, interrupted
from ...connections.live import LiveConnection
from ...connections.registry import ConnectionLike, live
from ...connections.syncforms import sync_form
from ...defaults import MAX_HELD_BYTES, MAX_IN_FLIGHT
from ...entities import DEAD_LETTER_QUEUE, EntityPath
from ...errors import EntityNotFoundError, InvalidInputError
from ...files.resumable import write_atomically
from ...operations.bounds import TimeWindow
from ...operations.counts import admin_call
from ...operations.manage import QUEUE_PROPERTIES, create_entity, entity_properties, update_entity
from ...operations.window import When, enqueued_window, given_text
from ...outcome import Report
from ...rates import Rate, parse_rate
from ...renames import gathered
from ..brake import Brake, check_brake
from ..canary import Canary, check_canary
from ..stops import STOPS_GATHERED
from .api import SAVE_GRACE, acopy, copy_record
from .many_stops import GlobStops
from .progress import copy_records

log = logging.getLogger(__name__)
GLOB_CHARACTERS = "*?["
# What a queue made from the source's description takes of it (forwarding: only to what is there).
CREATED_FROM = tuple(QUEUE_PROPERTIES)


def is_glob(text: str) -> bool:
    """Whether an entity address names many (a glob in its queue part)."""
    return any(c in text.split("/", 1)[0] for c in GLOB_CHARACTERS)


@dataclass(frozen=True)
class Match:
    """One entity a glob matched (``copy_many``): where it is copied from and to."""

    source: EntityPath  # a queue, or its dead-letter queue
    target: EntityPath  # the queue of the same name in the target namespace


def _pattern(pattern: str) -> tuple[str, str]:
    """(the glob of queue names, the sub-queue suffix: '' or the dead-letter queue's), checked."""
    glob, _, rest = pattern.strip().partition("/")
    if any(c in rest for c in GLOB_CHARACTERS) or "subscriptions" in rest.lower():
        raise InvalidInputError(
            f"{pattern!r}: a glob names queues ('orders*', 'orders*/{DEAD_LETTER_QUEUE}'); a subscription's messages "
            "go to its topic, where every subscription would get them: copy subscriptions one at a time."
        )
    path = EntityPath.parse(f"placeholder/{rest}" if rest else "placeholder")
    return glob, ("/" + str(path).split("/", 1)[1]) if "/" in str(path) else ""


def glob_matches(pattern: str, src: LiveConnection) -> tuple[list[Match], list[str]]:
    """The queues of ``src`` the glob matches (case-insensitive, in name order), and the topics it
    matches (not copied: a topic holds no messages of its own)."""
    glob, suffix = _pattern(pattern)
    queues = admin_call(src, lambda admin: [q.name for q in admin.list_queues()])
    topics = admin_call(src, lambda admin: [t.name for t in admin.list_topics()])

    def hit(name: str) -> bool:
        return fnmatch.fnmatchcase(name.lower(), glob.lower())

    found = [Match(EntityPath.parse(q + suffix), EntityPath.parse(q)) for q in sorted(queues, key=str.lower) if hit(q)]
    return found, [t for t in topics if hit(t)]


def _names(admin: Any) -> set[str]:
    return {q.name.lower() for q in admin.list_queues()} | {t.name.lower() for t in admin.list_topics()}


def missing_targets(found: list[Match], dst: LiveConnection) -> list[Match]:
    """The matches whose target the target namespace does not have."""
    there = admin_call(dst, _names)
    return [m for m in found if m.target.name.lower() not in there]


# The keywords of acopy_many that each entity's acopy takes as they are.
PASSED_ON = frozenset(
    [
        "where",
        "max_messages",
        "keep_message_id",
        "max_in_flight",
        "rate",
        "max_held_bytes",
    ]
)
FORWARDING = ("forward_to", "forward_dead_lettered_messages_to")


def ensure_targets(
    found: list[Match], src: LiveConnection, dst: LiveConnection, *, create: bool, report: Report
) -> list[str]:
    """Every target there, or ``EntityNotFoundError`` naming those missing (``create``: made from
    the source's description, named in a note; forwarding set once all are made, to what the target
    namespace then has). Returns the names made."""
    missing = missing_targets(found, dst)
    if missing and not create:
        names = ", ".join(m.target.name for m in missing)
        raise EntityNotFoundError(
            f"Not in the target namespace: {names}. Create them first, or copy with --create (create=True) to make "
            "each from its source's description; nothing was copied."
        )
    forwards: dict[str, dict[str, str]] = {}
    for m in missing:
        described = entity_properties(m.source.name, connection=src)  # the source queue's description
        values = {k: v for k, v in described.items() if k in CREATED_FROM and v is not None}
        forwards[m.target.name] = {k: str(values.pop(k)).rsplit("/", 1)[-1] for k in FORWARDING if values.get(k)}
        create_entity(m.target.name, kind="queue", properties=values, connection=dst)
    there = admin_call(dst, _names)
    for name, targets in forwards.items():
        kept = {k: t for k, t in targets.items() if t.lower() in there}
        for key, target in targets.items():
            if key not in kept:
                report.note(f"{name} made without {key} (its target {target} is not in the target namespace)")
        if kept:
            update_entity(name, properties=kept, connection=dst)
    if missing:
        report.note(f"made from the source's description: {', '.join(forwards)}")
    return list(forwards)


def _record(src: LiveConnection, dst: LiveConnection, pattern: str, options: dict[str, Any]) -> Path:
    key = {
        "source_namespace": src.fully_qualified_namespace.lower(),
        "pattern": pattern.lower(),
        "target_namespace": dst.fully_qualified_namespace.lower(),
    }
    digest = hashlib.sha256(json.dumps({**key, **options}, sort_keys=True).encode()).hexdigest()[:24]
    return copy_records() / f"copy-many-{digest}.json"


def _saved(record: Path) -> dict[str, Any]:
    try:
        found = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _done(record: Path) -> list[str]:
    return [str(name) for name in _saved(record).get("done", [])]


def _window(record: Path) -> TimeWindow | None:
    """The window an earlier run of the same call took (its ages resolved then), or None."""
    ends = _saved(record).get("window")
    if not isinstance(ends, list) or len(ends) != 2:
        return None
    try:
        after, before = (None if t is None else dt.datetime.fromisoformat(t) for t in ends)
    except (TypeError, ValueError):
        return None
    return TimeWindow(after, before)


def _save(record: Path, pattern: str, done: list[str], window: TimeWindow | None) -> None:
    saved: dict[str, Any] = {"pattern": pattern, "done": done}
    if window is not None:
        saved["window"] = [None if t is None else t.isoformat() for t in (window.after, window.before)]
    record.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(record, saved)


@gathered(**STOPS_GATHERED)
async def acopy_many(
    pattern: str,
    *,
    source_connection: ConnectionLike = None,
    connection: ConnectionLike = None,
    create: bool = False,
    where: str | None = None,
    max_messages: int | None = None,
    keep_message_id: bool = False,
    max_in_flight: int = MAX_IN_FLIGHT,
    rate: Rate | None = None,
    max_held_bytes: int = MAX_HELD_BYTES,
    progress: Callable[[Match, Report], None] | None = None,
    enqueued_after: When | None = None,
    enqueued_before: When | None = None,
    brake: Brake | None = None,
    canary: Canary | None = None,
) -> Report:
    """Copy the queues ``pattern`` matches (or their dead-letter queues) of ``source_connection`` into
    the queues of the same names of ``connection``, one ``acopy`` per entity, one Report with a part per
    entity (the module docstring). ``max_messages``: per entity. ``rate`` (``50/s``:
    ``core.parse_rate``): at most that many messages per second over the run (the entities are copied
    one after another). ``progress(match, report)`` as each entity's copy starts (an empty report), then
    after each of its sends. ``enqueued_after`` / ``enqueued_before`` (a datetime, ISO 8601 or an age
    such as ``2h``): each entity's messages enqueued in that window (found by a search over peeks,
    window.py); an age is taken once for all, kept in the glob's record to resume. The brake and the
    canary: one copy's (``acopy``), across the entities as the module docstring says."""
    same = {k: v for k, v in locals().items() if k in PASSED_ON}  # each entity's acopy takes these as given
    window, _ = enqueued_window(enqueued_after, enqueued_before), parse_rate(rate)  # a bad WHEN or rate: nothing read
    stops = GlobStops(check_brake(brake), check_canary(canary))  # checked before anything is read
    src, dst = live(source_connection), live(connection)
    report = Report("copy", pattern, target=dst.fully_qualified_namespace)
    answers_interrupts()  # interrupted: the entity being copied ends as acopy's does, the rest are not begun
    try:
        found = await _targets(pattern, src, dst, create, report)
    except asyncio.CancelledError:
        return before_anything(report)
    if not found:
        return report
    options = {"where": where, "max_messages": max_messages, "keep_message_id": keep_message_id}
    if window is not None:  # as typed: an age keys the record as typed (the same call resumes)
        options |= {"enqueued_after": given_text(enqueued_after), "enqueued_before": given_text(enqueued_before)}
    record, done, window = _resumed(src, dst, pattern, options, window)
    started = time.perf_counter()
    for m in found:
        if str(m.source) in done:
            report.parts.append(
                Report("copy", str(m.source), str(m.target), notes=["copied in full by an earlier run"])
            )
            continue
        if progress is not None:
            progress(m, Report("copy", str(m.source), str(m.target)))  # this entity's copy starts
        part = await acopy(
            m.source,
            m.target,
            **same,  # rate among them: the entities are copied one after another, the run keeps to it
            progress=None if progress is None else (lambda r, m=m: progress(m, r)),  # type: ignore[misc]
            source_connection=src,
            connection=dst,
            enqueued_after=None if window is None else window.after,
            enqueued_before=None if window is None else window.before,
            **stops.left(),  # what is left of the run's brake and canary
        )
        report.parts.append(part)
        report.merge(part)
        if part.ok and not part.failures and not (canary is not None and _unfinished(m, src, dst, options, window)):
            done.append(str(m.source))
            _save(record, pattern, done, window)
        if interrupted(part) or stops.stops_after(part, str(m.source)):
            break  # the entities after it are not begun: the same call again copies them
    report.elapsed = time.perf_counter() - started
    complete = {str(m.source) for m in found} <= set(done)
    if complete:
        record.unlink(missing_ok=True)  # complete: the same call again copies everything again
    stops.said(report, complete=complete)
    return report


async def _targets(pattern: str, src: LiveConnection, dst: LiveConnection, create: bool, report: Report) -> list[Match]:
    """The glob's matches, each target there (or made: ``ensure_targets``); topics matched are noted.
    The administration API is HTTP, called synchronously: off the connection's loop, which the
    copies' links share."""
    found, topics = await asyncio.to_thread(glob_matches, pattern, src)
    if topics:
        said = ", ".join(topics)
        report.note(f"topics matched but not copied (their messages are in their subscriptions): {said}")
    if found:
        await asyncio.to_thread(ensure_targets, found, src, dst, create=create, report=report)
    return found


def _resumed(
    src: LiveConnection, dst: LiveConnection, pattern: str, options: dict[str, Any], window: TimeWindow | None
) -> tuple[Path, list[str], TimeWindow | None]:
    """The glob's record, the entities an earlier run of the same call copied in full, and the window
    every entity's copy takes (an earlier run's instants, saved before the first entity)."""
    record = _record(src, dst, pattern, options)
    done, saved = _done(record), _window(record)
    window = saved if window is not None and saved is not None else window
    if window is not None:
        _save(record, pattern, done, window)
    return record, done, window


def _unfinished(m: Match, src: LiveConnection, dst: LiveConnection, options: dict[str, Any], window: Any) -> bool:
    """Whether the entity's copy keeps its record (a canary's that left some: not copied in full)."""
    return copy_record(
        m.source,
        m.target,
        where=options["where"],
        max_messages=options["max_messages"],
        keep_message_id=options["keep_message_id"],
        source_connection=src,
        connection=dst,
        enqueued_after=None if window is None else window.after,
        enqueued_before=None if window is None else window.before,
    ).exists()


copy_many = sync_form(acopy_many, grace=SAVE_GRACE)
