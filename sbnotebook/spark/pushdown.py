"""Filter pushdown (the ``pushFilters`` option, pyspark 4.1+): Spark's filters on ``enqueued_time``
and ``sequence_number`` become the bounds a peek read plans with, the same bisection as
``enqueuedAfter`` / ``enqueuedBefore`` (docs/spark.md, "Filter pushdown").

Spark hands a Python data source simple filters, ANDed: ``GreaterThan(("enqueued_time",), value)``
and so on, a timestamp as an aware ``datetime`` (the instant: a string literal was already read in
the session's time zone). A filter is said to be handled only where the read returns exactly the
rows it keeps, edges included; the others go back to Spark, which evaluates them on the rows read.
Imported only when the option is given: pyspark 4.0 has none of these classes."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from ..core import TimeWindow
from .spec import ReadOptions

log = logging.getLogger("sbnotebook.spark")

TIME, NUMBER = ("enqueued_time",), ("sequence_number",)
CONF = "spark.sql.python.filterPushdown.enabled"  # Spark's own switch, off by default


@dataclass(frozen=True)
class Pushed:
    """What the filters bound: an enqueued-time window and sequence numbers low..high (None: open)."""

    window: TimeWindow | None = None
    low: int | None = None
    high: int | None = None

    def and_time(self, window: TimeWindow) -> Pushed:
        return replace(self, window=window if self.window is None else self.window.narrowed(window))

    def and_numbers(self, low: int | None, high: int | None) -> Pushed:
        if low is not None and (self.low is None or low > self.low):
            self = replace(self, low=low)
        if high is not None and (self.high is None or high < self.high):
            self = replace(self, high=high)
        return self


def _time(value: Any) -> dt.datetime | None:
    """An aware timestamp, in UTC; None for anything else (a naive one has no instant to compare)."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None and value.utcoffset() is not None:
        return value.astimezone(dt.UTC)
    return None


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _time_bound(f: Filter) -> tuple[TimeWindow, bool] | None:
    """The window a filter on enqueued_time keeps, and whether the read keeps exactly its rows."""
    if isinstance(f, In):
        times = [_time(v) for v in f.value]
        if not times or any(t is None for t in times):
            return None
        kept = [t for t in times if t is not None]
        # The range around the values narrows the read; Spark keeps only the values themselves.
        return TimeWindow(min(kept), max(kept), before_closed=True), False
    t = _time(getattr(f, "value", None))
    if t is None:
        return None
    if isinstance(f, GreaterThanOrEqual):
        return TimeWindow(after=t), True
    if isinstance(f, GreaterThan):
        return TimeWindow(after=t, after_open=True), True
    if isinstance(f, LessThan):
        return TimeWindow(before=t), True
    if isinstance(f, LessThanOrEqual):
        return TimeWindow(before=t, before_closed=True), True
    if isinstance(f, EqualTo):
        return TimeWindow(t, t, before_closed=True), True
    return None


def _number_bound(f: Filter) -> tuple[int | None, int | None, bool] | None:
    """The numbers a filter on sequence_number keeps (low, high), and whether exactly."""
    if isinstance(f, In):
        numbers = [_number(v) for v in f.value]
        if not numbers or any(n is None for n in numbers):
            return None
        kept = [n for n in numbers if n is not None]
        return min(kept), max(kept), False
    n = _number(getattr(f, "value", None))
    if n is None:
        return None
    if isinstance(f, GreaterThanOrEqual):
        return n, None, True
    if isinstance(f, GreaterThan):
        return n + 1, None, True
    if isinstance(f, LessThan):
        return None, n - 1, True
    if isinstance(f, LessThanOrEqual):
        return None, n, True
    if isinstance(f, EqualTo):
        return n, n, True
    return None


def push(filters: Iterable[Filter], options: ReadOptions) -> tuple[ReadOptions, list[Filter]]:
    """The read's options bounded by the filters it can use, and the filters Spark must still apply
    (each one of the given filters, as Spark requires). Time bounds apply to every peek read (a
    session's rows are filtered by time as it is peeked); sequence-number bounds to reads that are
    not by session (a session is peeked whole through its lock)."""
    pushed, rest = Pushed(), []
    for f in filters:
        attribute = getattr(f, "attribute", None)
        exact = False
        if attribute == TIME and (bound := _time_bound(f)) is not None:
            pushed, exact = pushed.and_time(bound[0]), bound[1]
        elif attribute == NUMBER and not options.session_enabled and (numbers := _number_bound(f)) is not None:
            pushed, exact = pushed.and_numbers(numbers[0], numbers[1]), numbers[2]
        if not exact:
            rest.append(f)
    window = options.window
    if pushed.window is not None:
        window = pushed.window if window is None else window.narrowed(pushed.window)
    start = options.from_sequence_number
    if pushed.low is not None:
        start = max(start, pushed.low)
    bounded = replace(options, window=window, from_sequence_number=start, to_sequence_number=pushed.high)
    if pushed != Pushed():
        log.info(
            "servicebus read of %s: filters pushed down: %s; left to Spark: %s",
            options.entity,
            pushed,
            rest or "none",
        )
    return bounded, rest
