"""Waiting in a test without racing the clock (issue 59 point 9).

A test that waits a fixed time for something to happen (``time.sleep(0.3)``, then an assertion), or
gives it a short window (a tail of 1 s, a receive of ``max_wait_time=1``), passes on a quiet machine and
fails on a loaded one. A test waits for the thing itself instead: a condition polled until it holds
(``wait_until``), a count that has stopped moving (``settled``), an event, or the emulator's
manual clock (``@pytest.mark.servicebus_clock("manual")`` and ``emulator.advance()``, docs/testing.md
"Testing time") where the broker's time is what the test is about.

The one fixed number left is ``HANG``: how long such a wait may last before the test calls it a hang.
It only ends a wait that would never end, far above what any wait takes on a loaded machine and
below the suite's limit of 120 s a test (pyproject.toml), so it never decides a test's outcome."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

HANG = 60.0  # seconds


def wait_until(predicate: Callable[[], bool], timeout: float = HANG, interval: float = 0.05) -> None:
    """Until ``predicate()`` holds; ``timeout`` only ends a hang."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def settled(read: Callable[[], T], quiet: float = 0.5, within: float = HANG) -> T:
    """``read()`` once it has returned the same value for ``quiet`` seconds: what a count of requests
    comes to once what was in flight has landed. A count still moving after ``within`` seconds (work
    that never stops) fails the test. A loaded machine only makes it wait longer: the value it
    returns is checked by the caller against what may have happened at most."""
    deadline = time.monotonic() + within
    value, since = read(), time.monotonic()
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, f"still moving after {within:.0f} s (now {value!r})"
        time.sleep(0.05)
        now = read()
        if now != value:
            value, since = now, time.monotonic()
    return value


def renewed_past_the_lock(emulator: Any, lock: float, operation: str = "com.microsoft:renew-lock") -> None:
    """On a manual clock (``servicebus_clock("manual")``): each time a renewal of ``operation`` reaches
    the broker, its time moves on by 0.6 of the ``lock`` duration, four times. The broker's time ends
    2.4 locks on, and a lock held through it was kept by renewals alone: time never moved further
    than a renewal allowed, however late a loaded machine made it (the holder renews by the wall
    clock, which keeps going). Without renewals the wait ends as a hang (``HANG``)."""
    for _ in range(4):
        before = emulator.requests[operation]
        deadline = time.monotonic() + HANG
        while emulator.requests[operation] == before:
            assert time.monotonic() < deadline, f"no {operation} reached the broker in {HANG:.0f} s"
            time.sleep(0.02)
        emulator.advance(lock * 0.6)
