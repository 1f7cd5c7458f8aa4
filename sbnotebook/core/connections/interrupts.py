"""An interrupt that stops a bulk operation between two of its steps, never inside one.

An interrupted cell (KeyboardInterrupt in the thread waiting in ``LoopThread.run``) or a cancelled
task cancels the work where it stands: right for a read, wrong for a move, where a copy sent and its
original given back leaves the message in both places. An operation that moves messages (resubmit,
discard, copy, import) calls :func:`answers_interrupts` as it starts. Then:

- ``LoopThread.run`` and ``LoopThread.call`` deliver the interrupt as one cancellation of its task and
  wait for what it returns (a second interrupt meanwhile is logged, and changes nothing);
- the operation catches that cancellation, takes no new message, lets each step in flight end
  (:func:`uninterrupted`: a copy confirmed then its original completed, or the original given back
  whole, no copy sent), and returns its Report marked :func:`interrupted`: an error, so the Report
  is not ok (a magic shows it, then fails its cell), saying how to go on. A cancelled task gets
  that Report back from its ``await``, its cancellation taken back (``Task.uncancel``).

The send pipeline, interrupted, raises a plain ``CancelledError`` that carries its part-done Report
(:func:`interrupted_at`; :func:`report_of` reads it) up to the operation that called it, within one
task: a caller that knows nothing of it stops as before. (Not a class of the kit's own: the kit's
exceptions are ``SbError``s, and a cancellation is not an error.)
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

from ..outcome import Report

T = TypeVar("T")
INTERRUPTED = "interrupted"  # how a Report's error says it (``interrupted``)


class Submission:
    """One coroutine run on the loop for a caller elsewhere (``LoopThread.run`` / ``call``): its
    task, and whether it answers an interrupt with its result (``answers_interrupts``)."""

    def __init__(self) -> None:
        self.task: asyncio.Task[Any] | None = None
        self.answers = False

    async def running(self, coro: Coroutine[Any, Any, T]) -> T:
        self.task = asyncio.current_task()
        _SUBMITTED.set(self)  # in this task's own context: what it awaits sees it
        try:
            return await coro
        finally:
            # The task's context holds this submission: holding the task too would make a cycle, and
            # the task's result (a page of messages) would wait for the cycle collector.
            self.task = None

    def interrupt(self, loop: asyncio.AbstractEventLoop) -> None:
        """Cancel the task once, from any thread: the operation answers with its Report."""
        loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()


_SUBMITTED: contextvars.ContextVar[Submission | None] = contextvars.ContextVar("sbnotebook_submitted", default=None)


def answers_interrupts() -> None:
    """Called by an operation as it starts: interrupted, it ends its steps in flight and returns
    its Report, so the caller waits for that instead of dropping it (see the module docstring)."""
    submitted = _SUBMITTED.get()
    if submitted is not None:
        submitted.answers = True


def interrupted_at(report: Report) -> asyncio.CancelledError:
    """The cancellation to raise once the steps in flight ended, carrying what was done (``report``)."""
    stop = asyncio.CancelledError(INTERRUPTED)
    stop.report = report  # type: ignore[attr-defined]
    return stop


def report_of(stop: asyncio.CancelledError) -> Report | None:
    """The Report a cancellation carries (``interrupted_at``), or None: it came from elsewhere."""
    found = getattr(stop, "report", None)
    return found if isinstance(found, Report) else None


async def uninterrupted(work: Awaitable[T]) -> tuple[T, bool]:
    """``work`` run to its end, whatever cancels the caller meanwhile: a step that must not be cut
    in two. Returns its result and whether the caller was cancelled meanwhile; each such
    cancellation is taken back, and the caller says what it means (stop after this step)."""
    task = asyncio.ensure_future(work)
    cut = False
    while True:
        try:
            return await asyncio.shield(task), cut
        except asyncio.CancelledError:
            if task.cancelled():
                raise  # the work itself was cancelled (the loop closing): nothing to wait for
            cut = True
            taken_back()


def taken_back() -> None:
    """The current task's cancellation answered (the operation returns its Report): not cancelling
    any more, so the caller's next call of the kit is not stopped by it."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        task.uncancel()


def mark_interrupted(report: Report, said: str) -> None:
    """The Report of an interrupted run: an error (not ok), ``said`` what was done and how to go on."""
    report.error(f"{INTERRUPTED}: {said}")


def before_anything(report: Report) -> Report:
    """The answer of an operation interrupted before it moved anything: ``report``, marked so."""
    taken_back()
    mark_interrupted(report, "stopped before anything was moved; the same call again starts it")
    return report


def interrupted(report: Report) -> bool:
    """Whether the Report is of a run that was interrupted (``mark_interrupted``)."""
    return any(e.startswith(f"{INTERRUPTED}:") for e in report.errors)
