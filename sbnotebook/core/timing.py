"""How long a piece of work has run: ``elapsed`` and a rate, for the kit's long-running views
(``tail.Tail``, ``triage.GroupCounts``), written once."""

from __future__ import annotations

import time


class Timed:
    """``elapsed`` and ``per_second`` for a class that sets ``started`` and ``finished``
    (``time.monotonic()``; ``finished`` is None while the work runs)."""

    started: float
    finished: float | None

    @property
    def elapsed(self) -> float:
        """Seconds from the start to now, or to the finish once finished."""
        return (self.finished if self.finished is not None else time.monotonic()) - self.started

    def per_second(self, n: int) -> float:
        """``n`` (messages, polls) per second of ``elapsed`` (0 before any time has passed)."""
        elapsed = self.elapsed
        return n / elapsed if elapsed > 0 else 0.0
