"""Export of a whole entity (or the matches of a search) to a JSON lines file (core/incidents/jsonl.py's
format), page by page, resumable after an interrupt or a kill."""

from __future__ import annotations

import itertools
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from ..connections.registry import ConnectionLike, live
from ..entities import EntityPath
from ..errors import SbError
from ..views.search import Where, predicate
from .jsonl import to_json_record
from .resumable import write_atomically

log = logging.getLogger("sbnotebook.core.incidents.jsonl")  # export's and import's lines under one name, as before


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


def export_resume_point(entity: str | EntityPath, path: str | Path, where: Where = None) -> tuple[int, int] | None:
    """Where an interrupted export of ``entity`` (and the same ``where``) into ``path`` stopped:
    (messages in the file, the last one's sequence number), or None when there is nothing to resume
    (no export of that entity and search was interrupted there, or ``where`` is a function, which
    leaves no record of itself: the export starts the file again)."""
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
    where: Where = None,
    progress: Callable[[int, int], None] | None = None,
    connection: ConnectionLike = None,
) -> int:
    """Write every message of an entity (or, with ``where``, every match: a search expression, see
    ``compile_where``, or a function of a record) as JSON lines, read with the scanner page by page
    (memory stays flat whatever the size).
    ``progress(read, written)`` after each page. Returns how many messages the file holds.

    Resumable: while it runs, a marker file (``path`` + ``.exporting``) says the export is not
    complete. Interrupted (a kernel interrupt, the process killed), the same call appends from the
    message after the last one in the file (its sequence number), so nothing is written twice; a
    line cut by the kill is removed first. A complete export started again replaces the file. An
    export with a ``where`` function starts afresh each time (a function cannot be recorded)."""
    from ..operations.scan import scan, sessions_refused

    matches = predicate(where)
    path = Path(path)
    name = str(EntityPath.parse(entity))
    conn = live(connection)
    resume = export_resume_point(name, path, where)
    before, last = resume if resume is not None else (0, 0)
    pages = scan(name, from_sequence_number=last + 1, connection=conn)
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
        write_atomically(marker, {"entity": name, "where": where})
    read = written = 0
    with path.open("a" if resume is not None else "w", encoding="utf-8") as f:
        for page in itertools.chain([first] if first is not None else [], pages):
            read += len(page)
            for r in page:
                if matches is None or matches(r):
                    f.write(json.dumps(to_json_record(r), ensure_ascii=False) + "\n")
                    written += 1
            f.flush()  # a kill loses at most the page being written
            if progress is not None:
                progress(before + read, before + written)
        os.fsync(f.fileno())
    marker.unlink(missing_ok=True)
    return before + written
