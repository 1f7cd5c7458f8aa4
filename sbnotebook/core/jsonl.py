"""The JSON lines export format, derived from the record schema (``core.records.FIELDS``), and
export / import of whole entities with it.

One JSON object per message with every field in schema order: times as ISO strings, the body as
text in ``body`` (what ``core.send`` and ``%%sb_send`` send back), and binary bodies, which have no
text, as ``body_base64`` so they come back byte for byte. Application properties are the record's
map of strings (non-string values JSON-encoded); ``import_jsonl(decode_properties=True)`` turns
JSON numbers and booleans back into numbers and booleans.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import os
import re
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .entities import EntityPath
from .errors import InvalidInputError
from .outcome import Outcome, Report
from .records import FIELDS
from .registry import ConnectionLike, live

Record = dict[str, Any]
log = logging.getLogger("sbnotebook.core.jsonl")


def to_json_record(record: Record) -> Record:
    """A record as a JSON-ready dict (see the module docstring)."""
    out: Record = {}
    for f in FIELDS:
        value = record.get(f.name)
        if f.kind == "binary":
            if record.get("body_text") is None:
                out["body_base64"] = base64.b64encode(bytes(value or b"")).decode()
            out[f.name] = record.get("body_text")
        elif f.kind == "timestamp" and value is not None:
            out[f.name] = value.isoformat()
        else:
            out[f.name] = value
    return out


def from_json_record(obj: Record) -> Record:
    """An exported object back as a record: bytes body, datetimes for the timestamp fields."""
    record: Record = {}
    for f in FIELDS:
        value = obj.get(f.name)
        if f.kind == "binary":
            encoded = obj.get("body_base64")
            text = obj.get("body_text", value)
            value = base64.b64decode(encoded) if isinstance(encoded, str) else (text or "").encode()
        elif f.kind == "timestamp" and isinstance(value, str):
            value = dt.datetime.fromisoformat(value)
        record[f.name] = value
    return record


def write_jsonl(records: Iterable[Record], path: str | Path) -> int:
    """Write records as JSON lines; returns how many."""
    n = 0
    with Path(path).open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(to_json_record(r), ensure_ascii=False) + "\n")
            n += 1
    return n


def iter_jsonl(path: str | Path) -> Iterator[Record]:
    """Records from a JSON lines export, one at a time; a line that is not a JSON object fails
    with its number."""
    with Path(path).open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"Line {number} of {path} is not valid JSON ({exc.msg}).") from None
            if not isinstance(obj, dict):
                raise InvalidInputError(f"Line {number} of {path} is not a JSON object (an exported message).")
            yield from_json_record(obj)


def read_jsonl(path: str | Path) -> list[Record]:
    """Records from a JSON lines export (ready for ``core.send``)."""
    return list(iter_jsonl(path))


EXPORTING = ".exporting"  # beside an export while it is written; gone once it is complete


def _export_marker(path: str | Path) -> Path:
    return Path(f"{path}{EXPORTING}")


def export_resume_point(entity: str | EntityPath, path: str | Path, where: str | None = None) -> tuple[int, int] | None:
    """Where an interrupted export of ``entity`` (and the same ``where``) into ``path`` stopped:
    (messages in the file, the last one's sequence number), or None when there is nothing to resume
    (no export of that entity and search was interrupted there: the export starts the file again)."""
    marker, file = _export_marker(path), Path(path)
    if not marker.is_file() or not file.is_file():
        return None
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
    except ValueError:
        return None
    if info.get("entity") != str(EntityPath.parse(entity)) or info.get("where") != where:
        return None
    lines, last = _complete_lines(file)
    return lines, last


def _complete_lines(file: Path) -> tuple[int, int]:
    """Cut a line the kill left half written, then (lines, the last line's sequence number). The
    file is read once in blocks: nothing of it is kept."""
    end = 0  # just past the last newline
    lines = 0
    with file.open("rb") as f:
        offset = 0
        while block := f.read(1 << 20):
            n = block.count(b"\n")
            if n:
                lines += n
                end = offset + block.rindex(b"\n") + 1
            offset += len(block)
        if end < offset:
            log.info("export %s: cutting a half-written last line (%d bytes)", file, offset - end)
        last = 0
        if lines:
            f.seek(max(0, end - (1 << 20)))
            tail = f.read(end - f.tell()).rstrip(b"\n").rsplit(b"\n", 1)[-1]
            last = int(json.loads(tail)["sequence_number"])
    if end < file.stat().st_size:
        with file.open("r+b") as f:
            f.truncate(end)
    return lines, last


def export_jsonl(
    entity: str | EntityPath,
    path: str | Path,
    *,
    where: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    connection: ConnectionLike = None,
) -> int:
    """Write every message of an entity (or, with ``where``, every match; see ``compile_where``) as
    JSON lines, read with the scanner page by page (memory stays flat whatever the size).
    ``progress(read, written)`` after each page. Returns how many messages the file holds.

    Resumable: while it runs, a marker file (``path`` + ``.exporting``) says the export is not
    complete. Interrupted (a kernel interrupt, the process killed), the same call appends from the
    message after the last one in the file (its sequence number), so nothing is written twice; a
    line cut by the kill is removed first. A complete export started again replaces the file."""
    from .scan import scan
    from .search import compile_where

    matches = compile_where(where) if where else None
    path = Path(path)
    name = str(EntityPath.parse(entity))
    conn = live(connection)
    resume = export_resume_point(name, path, where)
    before, last = resume if resume is not None else (0, 0)
    if resume is not None:
        log.info("export of %s into %s resumes after %d messages (sequence number %d)", name, path, before, last)
    marker = _export_marker(path)
    _write_atomically(marker, {"entity": name, "where": where})
    read = written = 0
    with path.open("a" if resume is not None else "w", encoding="utf-8") as f:
        for page in scan(name, start=last + 1, connection=conn):
            read += len(page)
            for r in page:
                if matches is None or matches(r):
                    f.write(json.dumps(to_json_record(r), ensure_ascii=False) + "\n")
                    written += 1
            f.flush()  # a kill loses at most the page being written
            if progress is not None:
                progress(before + read, before + written)
        os.fsync(f.fileno())
    marker.unlink()
    return before + written


def _write_atomically(path: Path, content: dict[str, Any]) -> None:
    """Replace a small JSON file so that a kill leaves the old or the new one, never half of one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(content), encoding="utf-8")
    os.replace(tmp, path)


def decode_property(value: Any) -> Any:
    """An exported property value back to its type where the export JSON-encoded it: numbers,
    booleans, and binary values (``{"$binary": hex}``); anything else stays the string it is."""
    if not isinstance(value, str):
        return value
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    if isinstance(decoded, bool | int | float):
        return decoded
    if isinstance(decoded, dict) and set(decoded) == {"$binary"}:
        return bytes.fromhex(decoded["$binary"])
    return value


def sendable(
    record: Record,
    *,
    keep_ids: bool,
    decode_properties: bool,
    now: dt.datetime | None = None,
    message_id: str | None = None,
) -> Record:
    """An imported record as it is sent: a fresh message id (``message_id``, else a random one)
    unless ``keep_ids``; a scheduled time
    only when it is still ahead (it is kept on messages that were scheduled once); the broker's
    dead-letter reason and description dropped (as a resubmit drops them)."""
    from .copies import DEAD_LETTER_PROPERTIES

    out = dict(record)
    props = out.get("application_properties") or {}
    out["application_properties"] = {k: v for k, v in props.items() if k.lower() not in DEAD_LETTER_PROPERTIES}
    if not keep_ids:
        out["message_id"] = message_id or str(uuid.uuid4())
    when = out.get("scheduled_enqueue_time")
    if when is not None and when <= (now or dt.datetime.now(dt.UTC)):
        out["scheduled_enqueue_time"] = None
    if decode_properties:
        out["application_properties"] = {k: decode_property(v) for k, v in out["application_properties"].items()}
    return out


def count_jsonl(path: str | Path) -> int:
    """How many messages a JSON lines export holds, every line checked (nothing is sent from a
    file with a bad line)."""
    return sum(1 for _ in iter_jsonl(path))


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
    info = json.loads(marker.read_text(encoding="utf-8"))
    state = ImportProgress(**{**info, "failed": set(info.get("failed", []))})
    stat = Path(path).stat()
    if (stat.st_size, stat.st_mtime_ns) != (state.size, state.mtime_ns):
        raise InvalidInputError(
            f"{path} changed since an import of it into {name} was interrupted ({marker} holds where it "
            f"stopped). Delete {marker} to import the file from its first line."
        )
    return state


class Resumable(Protocol):
    """What a resumable send keeps: every line (or sequence number) up to ``done`` was sent but
    those in ``failed``."""

    done: int
    failed: set[int]

    def to_json(self) -> dict[str, Any]: ...


class LineTracker:
    """Follows every send outcome back to its line (input positions are consecutive; only those in
    flight are remembered) and keeps the marker up to date, at most every ``EVERY`` seconds (no
    marker: the state object alone, as ``core.copy`` keeps it). ``core.copy`` tracks sequence
    numbers the same way (increasing, like lines)."""

    EVERY = 0.2

    def __init__(self, state: Resumable, marker: Path | None) -> None:
        self.state = state
        self.marker = marker
        self.lines: deque[int] = deque()  # line of each position from `base` on
        self.base = 0
        self.finished: dict[int, bool] = {}  # position -> sent, for positions past `base`
        self.written = 0.0
        self.exhausted = False  # every line of the file was handed to the send
        self.confirmed = 0  # lines sent, counted as ``done`` passes them (so a saved count matches it)

    @property
    def complete(self) -> bool:
        return self.exhausted and not self.lines and not self.state.failed

    def taken(self, line: int) -> None:
        self.lines.append(line)

    def outcome(self, o: Outcome) -> None:
        if o.index is None:
            return  # a summary line ("stopped: ..."), no message of its own
        self.finished[o.index] = o.outcome == "sent"
        while self.base in self.finished:
            sent = self.finished.pop(self.base)
            line = self.lines.popleft()
            self.base += 1
            self.confirmed += sent
            if line <= self.state.done:  # a line that failed before, tried again
                if sent:
                    self.state.failed.discard(line)
            else:
                self.state.done = line
                if not sent:
                    self.state.failed.add(line)
        if time.monotonic() - self.written >= self.EVERY:
            self.save()

    def save(self) -> None:
        if self.marker is not None:
            _write_atomically(self.marker, self.state.to_json())
        self.written = time.monotonic()


def import_jsonl(
    entity: str | EntityPath,
    path: str | Path,
    *,
    keep_ids: bool = False,
    decode_properties: bool = False,
    max_in_flight: int = 10,
    progress: Callable[[Report], None] | None = None,
    connection: ConnectionLike = None,
) -> Report:
    """Send every message of a JSON lines export to a queue or topic, keeping body bytes, content
    type, subject, correlation id, session id, partition key, to, reply-to, application properties,
    time to live and (when still ahead) the scheduled time. Message ids are fresh unless
    ``keep_ids`` (duplicate detection would drop copies with the old ids). The file is checked
    first: a bad line sends nothing. One outcome per message; lines are read as they are sent.

    Resumable: while it runs, a marker beside the file (``path`` + ``.importing-`` + the target)
    records the lines sent. Interrupted (a kernel interrupt, the process killed) or with lines that
    failed, the same call again sends only what is left. Lines in flight at a kill are sent again:
    with the same message ids (the exported ones with ``keep_ids``, else fresh ids derived from the
    marker), so a target with duplicate detection drops them; without it they are duplicated."""
    if not Path(path).is_file():
        raise InvalidInputError(f"No file {path}: give the path of a JSON lines export.")
    name = str(EntityPath.parse(entity))
    state = import_resume_point(name, path)
    total = count_jsonl(path)  # every line checked before the first send
    stat = Path(path).stat()
    if state is None:
        state = ImportProgress(name, str(uuid.uuid4()), stat.st_size, stat.st_mtime_ns)
    else:
        log.info(
            "import of %s into %s resumes: %d of %d lines done, %d failed before",
            path,
            name,
            state.done,
            total,
            len(state.failed),
        )
    marker = _import_marker(path, name)
    tracker = LineTracker(state, marker)
    tracker.save()  # before the first send: a re-run finds the same seed, so the same ids
    seed = uuid.UUID(state.seed)
    retry, start = sorted(state.failed), state.done

    def records() -> Iterator[Record]:
        for number, record in _numbered(path):
            if number > start or number in state.failed:
                tracker.taken(number)
                yield sendable(
                    record,
                    keep_ids=keep_ids,
                    decode_properties=decode_properties,
                    message_id=str(uuid.uuid5(seed, str(number))),
                )
        tracker.exhausted = True

    from .send import asend

    conn = live(connection)

    async def run() -> Report:
        try:
            return await asend(
                name,
                records(),
                max_in_flight=max_in_flight,
                progress=progress,
                on_outcome=tracker.outcome,
                connection=conn,
            )
        finally:
            tracker.save()  # also when interrupted: the next run starts from here

    try:
        report = conn.run_on(EntityPath.parse(name), run())
    except Exception:
        if not state.pending:
            marker.unlink(missing_ok=True)  # refused before anything was sent (no such entity, ...)
        raise
    if retry or start:
        report.note(f"resumed: {start} lines done before, {len(retry)} of them failed and were tried again")
    if tracker.complete:
        marker.unlink()
    else:
        # From counts: what this run was to send less what it sent. (Counting its failed outcomes
        # left out the lines a send stopped part-way never read.)
        left = len(retry) + _message_lines_after(path, start) - report.count("sent")
        report.note(f"{left} messages not sent: the same import again sends them ({marker.name} keeps track)")
    return report


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
