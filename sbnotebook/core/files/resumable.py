"""Resumable sends: a small state file replaced atomically, and the tracker that follows every send
outcome back to its line of a file (``import_jsonl``) or its source sequence number (``core.copy``)."""

from __future__ import annotations

import json
import os
import time
from collections import deque
from pathlib import Path
from typing import Any, Protocol

from ..outcome import Outcome


def write_atomically(path: Path, content: dict[str, Any]) -> None:
    """Replace a small JSON file so that a kill leaves the old or the new one, never half of one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(content), encoding="utf-8")
    os.replace(tmp, path)


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
            write_atomically(self.marker, self.state.to_json())
        self.written = time.monotonic()
