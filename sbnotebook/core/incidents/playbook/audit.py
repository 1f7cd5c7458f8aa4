"""A playbook run's audit: one row per message it acted on or left, written as the broker confirms
each outcome, and read back as a DataFrame (``audit``).

A run writes ``AUDIT_FOLDER/RUN_ID.jsonl`` line by line (flushed as it goes: a crash loses no row
the broker confirmed); with ``format: parquet`` the finished run's file becomes
``RUN_ID.parquet``. Each row holds ``COLUMNS``. ``outcome`` is one of ``OUTCOMES``: a copy's own
sequence number is not known to its sender (Service Bus returns none for a sent message), so a
moved row names the copy by ``copy_message_id`` and ``target``.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...errors import InvalidInputError

COLUMNS = (
    "run_id",
    "time",
    "playbook",
    "rule",
    "entity",
    "sequence_number",
    "message_id",
    "signature",
    "action",
    "outcome",
    "target",
    "copy_message_id",
    "note",
)
OUTCOMES = ("moved", "parked", "discarded", "kept", "stopped before", "left", "failed", "duplicated")
MOVED = ("moved", "parked")  # a copy is at the target and the original completed


class AuditWriter:
    """Appends a run's rows to its JSON lines file, one flushed line each, from any thread."""

    def __init__(self, path: Path, run_id: str, playbook: str) -> None:
        self.path, self.run_id, self.playbook = path, run_id, playbook
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self.written = 0

    def row(self, **given: Any) -> None:
        """One row: ``given`` by column name (the run, time and playbook are filled in)."""
        unknown = set(given) - set(COLUMNS)
        if unknown:
            raise ValueError(f"not audit columns: {sorted(unknown)}")
        row = {c: given.get(c) for c in COLUMNS}
        row.update(run_id=self.run_id, playbook=self.playbook, time=dt.datetime.now(dt.UTC).isoformat())
        line = json.dumps(row, ensure_ascii=False, default=str)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()
            self.written += 1

    def close(self) -> None:
        with self._lock:
            self._file.close()


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InvalidInputError(f"No audit at {path}: give a playbook's audit folder or one run's file.")
    return sorted([*path.glob("*.jsonl"), *path.glob("*.parquet")])


def rows(path: Path) -> Iterable[dict[str, Any]]:
    """Every row of the audit at ``path`` (a folder: each run's file, oldest name first; or one file)."""
    for file in _files(path):
        if file.suffix == ".parquet":
            import pandas as pd

            yield from pd.read_parquet(file).to_dict("records")
            continue
        with file.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError:
                        # a run killed mid-line leaves its last line cut: every row before it stands
                        raise InvalidInputError(f"{file}:{number}: not a row of an audit (cut short?)") from None


def audit(path: str | Path) -> Any:
    """The audit at ``path`` (a playbook's audit folder, or one run's file) as a pandas DataFrame of
    ``COLUMNS``, one row per message a run acted on or left, ``time`` as UTC timestamps."""
    import pandas as pd

    frame = pd.DataFrame(list(rows(Path(path))), columns=list(COLUMNS))
    frame["time"] = pd.to_datetime(frame["time"], utc=True)
    frame["sequence_number"] = frame["sequence_number"].astype("Int64")
    return frame


def moved_before(path: Path) -> set[str]:
    """The message ids of the originals earlier runs moved (a copy of one that comes back
    dead-lettered carries it: a playbook never moves a message twice)."""
    if not path.is_dir():
        return set()
    return {str(r["message_id"]) for r in rows(path) if r.get("outcome") in MOVED and r.get("message_id")}


def to_parquet(jsonl: Path) -> Path:
    """A finished run's JSON lines file written as Parquet beside it (``format: parquet``), the JSON
    lines removed once the Parquet file is whole."""
    import pandas as pd

    target = jsonl.with_suffix(".parquet")
    frame = pd.DataFrame(list(rows(jsonl)), columns=list(COLUMNS))
    partial = target.with_suffix(".parquet.partial")
    frame.to_parquet(partial, index=False)
    partial.replace(target)
    jsonl.unlink()
    return target
