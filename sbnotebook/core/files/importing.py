"""Import of a JSON lines export (core/files/jsonl.py's format) into a queue or topic, through the settled,
capped sender, resumable line by line (core/files/resumable.py)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..connections.interrupts import answers_interrupts, mark_interrupted, report_of, taken_back
from ..connections.live import LiveConnection
from ..connections.registry import ConnectionLike, live
from ..defaults import MAX_IN_FLIGHT
from ..entities import EntityPath
from ..errors import InvalidInputError
from ..operations.messages import name_id
from ..outcome import Report
from ..rates import Rate, parse_rate
from ..renames import renamed
from ..tracing import operation
from .jsonl import Record, count_jsonl, from_json_record, sendable
from .resumable import LineTracker

log = logging.getLogger("sbnotebook.core.files.jsonl")  # export's and import's lines under one name, as before


IMPORTING = ".importing-"  # + the target: beside a file while an import from it is not complete


def _import_marker(path: str | Path, entity: str) -> Path:
    return Path(f"{path}{IMPORTING}{re.sub(r'[^A-Za-z0-9._-]+', '_', entity)}")


@dataclass
class ImportProgress:
    """What an interrupted import has done, kept in a marker file beside the export (``path`` +
    ``.importing-`` + the target) while the import is not complete: every line up to ``done`` was
    sent except those in ``failed``. ``seed`` makes the fresh message ids the same on a re-run, so
    a target with duplicate detection drops what was sent after the marker was last written."""

    entity: str
    seed: str
    size: int
    mtime_ns: int
    done: int = 0
    failed: set[int] = field(default_factory=set)

    @property
    def pending(self) -> bool:
        return self.done > 0 or bool(self.failed)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "failed": sorted(self.failed)}


def import_resume_point(entity: str | EntityPath, path: str | Path) -> ImportProgress | None:
    """The progress of an interrupted import of ``path`` into ``entity``, or None (nothing to
    resume). A file changed since the import began is refused: resuming would skip other lines."""
    name = str(EntityPath.parse(entity))
    marker = _import_marker(path, name)
    if not marker.is_file():
        return None
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
        state = ImportProgress(**{**info, "failed": set(info.get("failed", []))})
    except (ValueError, TypeError, AttributeError) as exc:
        # Not started over: lines it recorded as sent would be sent again (duplicated on a target
        # without duplicate detection). The user decides.
        raise InvalidInputError(
            f"{marker} (where an import of {path} into {name} stopped) is unreadable ({type(exc).__name__}). "
            f"Delete it to import the file from its first line: lines sent before are sent again."
        ) from None
    stat = Path(path).stat()
    if (stat.st_size, stat.st_mtime_ns) != (state.size, state.mtime_ns):
        raise InvalidInputError(
            f"{path} changed since an import of it into {name} was interrupted ({marker} holds where it "
            f"stopped). Delete {marker} to import the file from its first line."
        )
    return state


@renamed(keep_ids="keep_message_id")
def import_jsonl(
    entity: str | EntityPath,
    path: str | Path,
    *,
    keep_message_id: bool = False,
    decode_properties: bool = False,
    max_in_flight: int = MAX_IN_FLIGHT,
    rate: Rate | None = None,
    progress: Callable[[Report], None] | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Send every message of a JSON lines export to a queue or topic, keeping body bytes, content
    type, subject, correlation id, session id, partition key, to, reply-to, application properties,
    time to live and (when still ahead) the scheduled time. Message ids are fresh unless
    ``keep_message_id`` (duplicate detection would drop copies with the old ids). The file is checked
    first: a bad line sends nothing. One outcome per message; lines are read as they are sent.

    Resumable: while it runs, a marker beside the file (``path`` + ``.importing-`` + the target)
    records the lines sent. Interrupted (a kernel interrupt, the process killed) or with lines that
    failed, the same call again sends only what is left. Lines in flight at a kill are sent again:
    with the same message ids (the exported ones with ``keep_message_id``, else fresh ids derived from the
    marker), so a target with duplicate detection drops them; without it they are duplicated.
    ``rate`` (``50/s``, ``3000/m``: ``core.parse_rate``): at most that many messages per second."""
    parse_rate(rate)  # a bad rate fails before the marker is written
    if not Path(path).is_file():
        raise InvalidInputError(f"No file {path}: give the path of a JSON lines export.")
    name = str(EntityPath.parse(entity))
    state = _starting_state(name, path)
    marker = _import_marker(path, name)
    tracker = LineTracker(state, marker)
    tracker.save()  # before the first send: a re-run finds the same seed, so the same ids
    seed = uuid.UUID(state.seed)
    retry, start = sorted(state.failed), state.done
    # Made inside the send: only the send holds the generator (and the open file), and not past its end.
    records = functools.partial(
        _records,
        path,
        state,
        tracker,
        seed,
        start,
        keep_message_id=keep_message_id,
        decode_properties=decode_properties,
    )
    conn = live(connection)
    pace = {"max_in_flight": max_in_flight, "rate": rate, "progress": progress}
    try:
        with operation("import", conn, name) as span:
            report = conn.run_on(EntityPath.parse(name), _send(name, records, tracker, conn, pace))
            span.report(report)
    except Exception:
        if not state.pending:
            marker.unlink(missing_ok=True)  # refused before anything was sent (no such entity, ...)
        raise
    _conclude(report, path, tracker, marker, retry, start)
    return report


def _starting_state(name: str, path: str | Path) -> ImportProgress:
    """Where the import of ``path`` into ``name`` stopped before, or a fresh start (a new seed).
    Every line is checked first: a bad one raises before anything is sent."""
    state = import_resume_point(name, path)
    total = count_jsonl(path)  # every line checked before the first send
    stat = Path(path).stat()
    if state is None:
        return ImportProgress(name, str(uuid.uuid4()), stat.st_size, stat.st_mtime_ns)
    log.info(
        "import of %s into %s resumes: %d of %d lines done, %d failed before",
        path,
        name,
        state.done,
        total,
        len(state.failed),
    )
    return state


def _records(
    path: str | Path,
    state: ImportProgress,
    tracker: LineTracker,
    seed: uuid.UUID,
    start: int,
    *,
    keep_message_id: bool,
    decode_properties: bool,
) -> Iterator[Record]:
    """The messages still to send, read as they are sent: the lines after ``start`` and those that
    failed before, each handed to ``tracker`` in order. Ids derived from ``seed`` and the line number."""
    for number, record in _numbered(path):
        if number > start or number in state.failed:
            tracker.taken(number)
            yield sendable(
                record,
                keep_message_id=keep_message_id,
                decode_properties=decode_properties,
                message_id=name_id(seed, str(number)),
            )
    tracker.exhausted = True


async def _send(
    name: str,
    records: Callable[[], Iterator[Record]],
    tracker: LineTracker,
    conn: LiveConnection,
    pace: dict[str, Any],
) -> Report:
    """``asend`` of ``records()`` (``pace``: its ``max_in_flight``, ``rate`` and ``progress``), every
    outcome followed by ``tracker``, its marker saved at the end. Interrupted, it takes no more lines,
    and returns once the sends in flight are confirmed (``connections/interrupts.py``): the marker
    then holds every line the target confirmed."""
    from ..operations.send import asend

    answers_interrupts()
    try:
        return await asend(
            name,
            records(),
            on_outcome=tracker.outcome,
            connection=conn,
            **pace,
        )
    except asyncio.CancelledError as stop:
        done = report_of(stop)
        if done is None:
            raise  # cancelled before the pipeline took it: as before
        taken_back()  # answered with the Report
        said = f"stopped taking lines after {done.count('sent')} were sent (each send in flight confirmed first)"
        mark_interrupted(done, f"{said}; the same import again sends what is left")
        return done
    finally:
        tracker.save()  # also when interrupted: the next run starts from here


def _conclude(
    report: Report, path: str | Path, tracker: LineTracker, marker: Path, retry: list[int], start: int
) -> None:
    """The report's notes on a resumed or incomplete import; the marker deleted once it is complete."""
    if retry or start:
        report.note(f"resumed: {start} lines done before, {len(retry)} of them failed and were tried again")
    if tracker.complete:
        marker.unlink()
    else:
        # From counts: what this run was to send less what it sent. (Counting its failed outcomes
        # left out the lines a send stopped part-way never read.)
        left = len(retry) + _message_lines_after(path, start) - report.count("sent")
        report.note(f"{left} messages not sent: the same import again sends them ({marker.name} keeps track)")


def _message_lines_after(path: str | Path, line: int) -> int:
    """How many message (non-blank) lines of the file come after line number ``line``."""
    with Path(path).open(encoding="utf-8") as f:
        return sum(1 for number, text in enumerate(f, start=1) if number > line and text.strip())


def _numbered(path: str | Path) -> Iterator[tuple[int, Record]]:
    """(line number, record) for every message line of an export (blank lines are not messages but
    count as lines, so numbers match the file)."""
    with Path(path).open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if line.strip():
                yield number, from_json_record(json.loads(line))
