"""A live progress line in the notebook for long operations (sends, purges, imports)."""

from __future__ import annotations

import html
import time
from typing import Any

from IPython.display import display

from ...core import PROBLEMS, Outcome, Report, interrupted


class Progress:
    """A live line in the notebook (a progress bar where HTML renders, plain text elsewhere)."""

    def __init__(
        self,
        entity: str,
        verb: str = "Sending to",
        counted: str = "sent",
        total: int | None = None,
        *,
        relabel: bool = True,
    ) -> None:
        self.entity = entity
        self.relabel = relabel  # NAME:ENTITY: the Report's summary says NAME: too (not %sb_copy: its own)
        self.verb = verb
        self.counted = counted
        self.total = total
        self.handle: Any = None
        self.last = 0.0
        self.started = time.monotonic()

    def update(self, report: Report) -> None:
        now = time.monotonic()
        if now - self.last < 0.3:
            return
        self.last = now
        done = report.count(self.counted)
        rate = done / (now - self.started) if now > self.started else 0.0
        of = f" of {self.total}" if self.total else ""
        text = f"{self.verb} {self.entity}: {done}{of} {self.counted}, {report.failed} failed, {rate:.0f} msg/s"
        self.show(done, text + time_left(self.total, done, rate))

    def show(self, done: int, text: str) -> None:
        """Draw the line now: a bar at ``done`` of the total, and ``text``."""
        bar = f"<progress value='{done}' max='{self.total}'></progress>" if self.total else "<progress></progress>"
        bundle = {"text/plain": text, "text/html": f"{bar} {html.escape(text)}"}
        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)
        else:
            self.handle.update(bundle, raw=True)

    def finish(self, report: Report, verdict: str | None = None) -> None:
        name, sep, _ = self.entity.partition(":")
        if sep and self.relabel:  # a named connection's entity: the summary says NAME:ENTITY as the line did
            report.entity = report.entity if ":" in report.entity else f"{name}:{report.entity}"
            if report.target and ":" not in report.target:
                report.target = f"{name}:{report.target}"
        if verdict is None:
            verdict = verdict_of(report, self.counted)
        operations = report.stats.get("operations", 0)
        text = f"{report.summary()} ({verdict}), {report.rate:.0f} msg/s, {operations} operations."
        if self.handle is not None:
            self.handle.update({"text/plain": text, "text/html": html.escape(text)}, raw=True)
        else:
            print(text)
        if report.failures:
            frame = report.to_pandas()
            problems = frame[frame["outcome"].isin(PROBLEMS)]
            # A plain terminal gets one line per failure: pandas' text form cuts the error column.
            plain = "\n".join(_failure_line(o) for o in report.failures)
            display({"text/plain": plain, "text/html": problems.to_html(index=False, notebook=True)}, raw=True)


def time_left(total: int | None, done: int, rate: float) -> str:
    """``, about 12 s left`` at the rate so far (a ``--rate`` holds it), or "" without a total or a rate yet."""
    if not total or rate <= 0 or done >= total:
        return ""
    seconds = (total - done) / rate
    return f", about {seconds:.0f} s left" if seconds < 120 else f", about {seconds / 60:.0f} min left"


def say_interrupted(report: Report, again: str) -> None:
    """An interrupted command's line (its Report follows, and the cell fails after it): ``again``
    says what to type to go on."""
    if interrupted(report):
        print(f"Interrupted: {again}.")


def verdict_of(report: Report, counted: str) -> str:
    """The word in brackets after a summary, from the counts: "all purged" only when every message
    the report counts was purged and the report has no error (an error can stand for messages it
    could not count: a held session's); else how many failed, were left, and the errors."""
    done = report.count(counted)
    if report.total and done == report.total and not report.errors:
        return f"all {counted}"
    left = report.count("left")
    failed = report.failed - left
    parts = ([f"{failed} FAILED"] if failed else []) + ([f"{left} left"] if left else [])
    parts += [errors_of(report)] if report.errors else []
    return ", ".join(parts) or f"{done} {counted}"


def errors_of(report: Report) -> str:
    """``1 ERROR`` / ``2 ERRORS``: how many errors the report has (its summary says which)."""
    n = len(report.errors)
    return f"{n} ERROR{'S' if n > 1 else ''}"


def _failure_line(o: Outcome) -> str:
    if o.sequence_number is not None:
        which = f"sequence number {o.sequence_number}: "
    elif o.message_id:
        which = f"message id {o.message_id}: "
    else:
        which = ""
    tracking = f" (tracking id {o.tracking_id})" if o.tracking_id else ""
    return f"{which}{o.outcome}: {o.error or ''}{tracking}"
