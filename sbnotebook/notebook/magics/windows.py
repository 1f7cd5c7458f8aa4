"""What the commands that read or act share for issue 53: ``--enqueued-after WHEN`` /
``--enqueued-before WHEN`` (a half-open window of enqueued times, found by a search over peeks: never a read
of everything), and a ``--where`` that says what it could not evaluate."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from ... import core
from ...core import TimeWindow, Where
from .command import Parser

WHEN = "ISO 8601 (UTC without a zone) or an age: 90s, 30m, 2h, 1d"


def add_window(parser: Parser) -> None:
    """``--enqueued-after WHEN`` and ``--enqueued-before WHEN`` on ``parser``."""
    parser.add_argument("--enqueued-after", metavar="WHEN", help=f"only messages enqueued at or after WHEN ({WHEN})")
    parser.add_argument("--enqueued-before", metavar="WHEN", help=f"only messages enqueued before WHEN ({WHEN})")


def window_of(args: argparse.Namespace) -> TimeWindow | None:
    """The window the line asks for (ages from now, once), or None; a bad WHEN fails the cell."""
    return core.enqueued_window(args.enqueued_after, args.enqueued_before)


def within(window: TimeWindow | None) -> dict[str, Any]:
    """The core keywords of a window (resolved: a count and the action take the same instants)."""
    if window is None:
        return {}
    return {"enqueued_after": window.after, "enqueued_before": window.before}


def said(window: TimeWindow | None) -> str:
    """`` (enqueued from ... UTC)`` for a line, "" without a window."""
    return f" ({window.describe()})" if window is not None else ""


def records(entity: str, window: TimeWindow | None, connection: Any) -> Iterator[dict[str, Any]]:
    """Every record of ``entity``, or of its window only (found by a search), by peeking."""
    pages = (
        core.scan(entity, connection=connection)
        if window is None
        else core.scan_window(entity, window, connection=connection)
    )
    try:
        for page in pages:
            yield from page
    finally:
        pages.close()


def unevaluated(where: Where | None) -> None:
    """Fail the cell when the search raised on every message (one line naming the error and an
    example message); print how many it could not evaluate, by error, when it raised on some."""
    if where is None:
        return
    where.check()
    text = where.describe()
    if text:
        print(f"Note: {text}; they are not matches.")
