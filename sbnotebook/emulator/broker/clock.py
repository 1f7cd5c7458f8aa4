"""Injectable clocks: the broker never reads the wall clock itself.

Which timers follow the broker's clock (a ``ManualClock`` moves them only when advanced): peek-lock
and session-lock expiry, time to live, scheduled messages, the duplicate-detection window, and every
time a message reports (enqueued, locked until, expires at, scheduled) and a rule's creation. Real
time, always: SAS and Entra ID token lifetimes, AMQP idle timeouts, latency, how long a client waits
for a message or a session (a client's own clock judges those), and the administration API's
entity timestamps (CreatedAt, UpdatedAt, AccessedAt).
"""

from __future__ import annotations

import math
import re
import threading
import time
from datetime import timedelta
from typing import Literal, Protocol

from ..topology import TopologyError, parse_duration

ClockKind = Literal["system", "manual"]
CLOCK_KINDS: tuple[ClockKind, ...] = ("system", "manual")

# The kit's short durations (core.operations.manage.duration reads the same forms; the emulator
# imports nothing of core, so it has its own): 90s, 10m, 2h, 1d, 500ms.
_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$", re.I)
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the Unix epoch (UTC)."""
        ...


class SystemClock:
    """The emulator's default clock: real time."""

    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to: lock expiry and TTL tests in microseconds. It starts at
    real now unless given ``start`` (seconds since the epoch)."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        self._lock = threading.Lock()  # advance() may come from any thread

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time only moves forward")
        with self._lock:
            self._now += seconds


def make_clock(clock: Clock | ClockKind | None) -> Clock:
    """``"manual"``, ``"system"`` (or None) or a clock of one's own."""
    if clock is None or clock == "system":
        return SystemClock()
    if clock == "manual":
        return ManualClock()
    if isinstance(clock, str):
        raise ValueError(f"clock: {clock!r} is not one of {', '.join(CLOCK_KINDS)}")
    return clock


def span_seconds(value: timedelta | float | int | str) -> float:
    """Seconds in a ``timedelta``, a number of seconds (``"600"`` too), or the kit's forms (``90s``,
    ``10m``, ``2h``, ``1d``, ``500ms``); ISO-8601 (``PT10M``) too, as the topology file writes durations."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        match = _SPAN.match(value)
        if match:
            return float(match.group(1)) * _UNIT[(match.group(2) or "s").lower()]  # no unit: seconds
        if value.strip().upper().startswith("P"):
            try:
                return parse_duration(value)
            except TopologyError:
                pass
    raise ValueError(f"{value!r} is not a duration: use 90s, 10m, 2h, 1d, seconds or a timedelta")
