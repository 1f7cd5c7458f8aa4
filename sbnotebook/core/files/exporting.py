"""Export of a whole entity (or the matches of a search) to a JSON lines file (core/files/jsonl.py's
format), page by page, resumable after an interrupt or a kill."""

from __future__ import annotations

import itertools
import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..connections.registry import ConnectionLike, live
from ..entities import EntityPath
from ..errors import SbError
from ..operations.scan import ascan, sessions_refused
from ..operations.typed import typed_content
from ..operations.window import When, enqueued_window, given_text, locate, span_pages
from ..tracing import operation
from ..views.records import to_record
from ..views.search import WhereLike, as_where
from ..views.where import Where
from .jsonl import to_json_record
from .resumable import write_atomically

log = logging.getLogger("sbnotebook.core.files.jsonl")  # export's and import's lines under one name, as before


EXPORTING = ".exporting"  # beside an export while it is written; gone once it is complete


def _export_marker(path: str | Path) -> Path:
    return Path(f"{path}{EXPORTING}")


_SAID: set[tuple[str, int]] = set()  # unreadable markers warned of: (path, modification time)


def _first_word_on(marker: Path) -> bool:
    """Whether this unreadable marker (as it is now) was not warned of yet: %sb_export asks for the
    resume point, then the export asks again, and the user reads one warning, not two."""
    try:
        seen = (str(marker), marker.stat().st_mtime_ns)
    except OSError:  # gone meanwhile: nothing to say twice
        return True
    if seen in _SAID:
        return False
    _SAID.add(seen)
    return True


class Exported(int):
    """How many messages an export's file holds (an int), with what its ``where`` could not evaluate:
    ``unevaluated`` messages, ``unevaluated_by_error``, and the line that says so (``unevaluated_text``)."""

    unevaluated: int = 0
    unevaluated_by_error: dict[str, int]
    unevaluated_text: str | None = None


def _key(where: str | None, window: tuple[str | None, str | None]) -> dict[str, object]:
    """What an export's marker records of its arguments (the window as given: an age resumes as typed)."""
    key: dict[str, object] = {"where": where}
    if window != (None, None):
        key["window"] = list(window)
    return key


def export_resume_point(
    entity: str | EntityPath,
    path: str | Path,
    where: WhereLike = None,
    enqueued_after: When | None = None,
    enqueued_before: When | None = None,
) -> tuple[int, int] | None:
    """Where an interrupted export of ``entity`` (and the same ``where`` and window) into ``path``
    stopped: (messages in the file, the last one's sequence number), or None when there is nothing
    to resume (no export of that entity and search was interrupted there, or ``where`` is a
    function, which leaves no record of itself: the export starts the file again)."""
    marker, file = _export_marker(path), Path(path)
    if callable(where) or not marker.is_file() or not file.is_file():
        return None
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
        if not isinstance(info, dict):
            raise ValueError(f"a JSON {type(info).__name__}, not an object")
    except ValueError as exc:  # cut short (a full disk) or edited: no resume point to trust
        if _first_word_on(marker):
            log.warning(
                "export marker %s is unreadable (%s): the export starts over, writing %s afresh", marker, exc, file
            )
        return None
    wanted = _key(where, (given_text(enqueued_after), given_text(enqueued_before)))
    if info.get("entity") != str(EntityPath.parse(entity)) or {k: info.get(k) for k in ("where", "window")} != {
        "where": wanted["where"],
        "window": wanted.get("window"),
    }:
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
    where: WhereLike = None,
    progress: Callable[[int, int], None] | None = None,
    enqueued_after: When | None = None,
    enqueued_before: When | None = None,
    connection: ConnectionLike = None,
) -> Exported:
    """Write every message of an entity (or, with ``where``, every match: a search expression, see
    ``compile_where``, or a function of a record) as JSON lines, read with the scanner page by page
    (memory stays flat whatever the size).
    ``progress(read, written)`` after each page. Returns how many messages the file holds (an int,
    with ``unevaluated``: messages the search raised on; one that raised on every message fails,
    ``WhereFailed``, and the file is not kept). ``enqueued_after`` / ``enqueued_before``: only messages
    enqueued within that window (window.py: found by a search over peeks, not by reading everything).

    Resumable: while it runs, a marker file (``path`` + ``.exporting``) says the export is not
    complete. Interrupted (a kernel interrupt, the process killed), the same call appends from the
    message after the last one in the file (its sequence number), so nothing is written twice; a
    line cut by the kill is removed first. A complete export started again replaces the file. An
    export with a ``where`` function starts afresh each time (a function cannot be recorded)."""
    with operation("export", live(connection), EntityPath.parse(entity)) as span:
        exported = _export(entity, path, where, progress, enqueued_after, enqueued_before, connection)
        span.count(int(exported))
    return exported


def _export(
    entity: str | EntityPath,
    path: str | Path,
    where: WhereLike,
    progress: Callable[[int, int], None] | None,
    enqueued_after: When | None,
    enqueued_before: When | None,
    connection: ConnectionLike,
) -> Exported:
    matches = as_where(where)
    path = Path(path)
    name = str(EntityPath.parse(entity))
    conn = live(connection)
    given = (given_text(enqueued_after), given_text(enqueued_before))
    resume = export_resume_point(name, path, where, enqueued_after, enqueued_before)
    before, last = resume if resume is not None else (0, 0)
    pages = entity_pages(conn, name, last + 1, enqueued_window(enqueued_after, enqueued_before))
    try:
        # The first page before the file or the marker is touched: an export refused there (a
        # session-enabled entity, no such entity, no Listen right) leaves the file as it was and no
        # marker that the next export would take for one to resume.
        first = next(pages, None)
    except SbError as exc:
        refused = sessions_refused(EntityPath.parse(name), exc, "an export")
        if refused is None:
            raise
        raise refused from exc  # the cause kept: the magic's explain() says what to type next from it
    if resume is not None:
        log.info("export of %s into %s resumes after %d messages (sequence number %d)", name, path, before, last)
    marker = _export_marker(path)
    if callable(where):
        marker.unlink(missing_ok=True)  # no record to resume from: an old one must not name this file
    else:
        write_atomically(marker, {"entity": name, **_key(where, given)})
    read = written = 0
    with path.open("a" if resume is not None else "w", encoding="utf-8") as f:
        for page in itertools.chain([first] if first is not None else [], pages):
            read += len(page)
            for msg in page:
                r = to_record(msg, name)
                if matches is None or matches(r):
                    f.write(json.dumps(to_json_record(r, typed_content(msg)), ensure_ascii=False) + "\n")
                    written += 1
            f.flush()  # a kill loses at most the page being written
            if progress is not None:
                progress(before + read, before + written)
        os.fsync(f.fileno())
    marker.unlink(missing_ok=True)
    return _counted(before + written, matches, path, resume is None)


def entity_pages(conn: Any, name: str, start: int, window: Any) -> Iterator[list[Any]]:
    """The entity's pages of the SDK's messages from ``start`` (their types are read from them), or
    only its window's (found by a search over peeks)."""
    if window is None:
        return conn.iterate(ascan(name, from_sequence_number=start, connection=conn))
    span = locate(conn, name, window, start)
    log.info("export of %s: %s, %s", name, window.describe(), "nothing there" if span is None else span)
    if span is None:
        return iter(())
    return ([msg for msg, _ in page] for page in span_pages(name, span, from_sequence_number=start, connection=conn))


def _counted(n: int, matches: Where | None, path: Path, fresh: bool) -> Exported:
    """The count, with what the search could not evaluate; a search that raised on every message
    fails, and a file it started holds nothing worth keeping."""
    out = Exported(n)
    out.unevaluated_by_error = {}
    if matches is None:
        return out
    if matches.failed_everywhere and fresh:
        path.unlink(missing_ok=True)
    matches.check()
    out.unevaluated, out.unevaluated_by_error = matches.unevaluated, matches.by_error()
    out.unevaluated_text = matches.describe()
    return out
