"""Times on the commands, each read with core's one grammar (``core.parse_time``; docs/names.md,
Times) and refused in one line naming its forms: ``--enqueued-after WHEN`` / ``--enqueued-before WHEN``
on the commands that read or act (a half-open window of enqueued times, found by a search over peeks:
never a read of everything), ``--updated-after WHEN`` (%sb_sessions), ``--schedule-at WHEN``
(%%sb_send: a time to come, ``+2h``). Beside the window: the records it holds, and a ``--where`` that
says what it could not evaluate."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from typing import Any

from IPython.core.error import UsageError

from ... import core
from ...core import InvalidInputError, TimeWindow, Where
from .command import Parser


def add_time(parser: Parser, flag: str, help: str, *, future: bool = False) -> None:
    """``flag WHEN`` on ``parser``: a time in the past (an age: ``2h``), or with ``future`` a time to
    come (``+2h``). The text is checked as the line is read and kept as typed: an age is taken from
    the moment the command uses it (once for both ends of a window: ``window_of``)."""
    forms = core.FUTURE_TIME_FORMS if future else core.TIME_FORMS
    parser.add_argument(flag, metavar="WHEN", type=_checked(parser, flag, future), help=f"{help}; WHEN: {forms}")


def _checked(parser: Parser, flag: str, future: bool) -> Callable[[str], str]:
    def check(text: str) -> str:
        try:
            core.parse_time(text, future=future, name=flag)
        except InvalidInputError as exc:  # a ValueError: argparse would swallow its message
            raise UsageError(f"{parser.prog}: {exc.message}") from None
        return text

    return check


def add_window(parser: Parser) -> None:
    """``--enqueued-after WHEN`` and ``--enqueued-before WHEN`` on ``parser``."""
    add_time(parser, "--enqueued-after", "only messages enqueued at or after WHEN")
    add_time(parser, "--enqueued-before", "only messages enqueued before WHEN")


def window_of(args: argparse.Namespace) -> TimeWindow | None:
    """The window the line asks for (ages from now, once), or None; a window that ends before it
    starts fails the cell."""
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
