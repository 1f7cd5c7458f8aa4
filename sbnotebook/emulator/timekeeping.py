"""The emulator's clock seen from outside (a part of ``server.Emulator``): ``now()``, and
``advance()`` of a manual clock, which fires everything that fell due before it returns.

The step runs on the broker's own thread, as every frame does, so a test's thread never moves time
under an operation half done; the caller waits for it. broker/clock.py says which timers follow
the clock and which keep real time.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from .amqp.handler import BrokerHandler
from .broker.broker import Broker
from .broker.clock import Clock, ManualClock, span_seconds
from .net.loop import EventLoop

ADVANCE_TIMEOUT = 30.0  # seconds to wait for the broker's thread to take the step

MANUAL_CLOCK_HINT = (
    "advance() needs the manual clock and this emulator runs on the system clock: ask for it with "
    "Emulator(clock='manual'), `sbnotebook emulator --clock manual`, or, in pytest, "
    "@pytest.mark.servicebus_clock('manual') on the test"
)


class ClockError(RuntimeError):
    """Time cannot move: the emulator's clock is the system's."""


class Timekeeping:
    broker: Broker
    _handler: BrokerHandler
    _loop: EventLoop | None
    _thread: threading.Thread | None
    stopped: threading.Event

    @property
    def clock(self) -> Clock:
        return self.broker.clock

    @property
    def clock_kind(self) -> str:
        """``manual`` (moves only with ``advance``) or ``system``."""
        return "manual" if isinstance(self.broker.clock, ManualClock) else "system"

    def now(self) -> datetime:
        """The emulator's time (UTC): what enqueued times, lock and TTL expiry and schedules follow."""
        return datetime.fromtimestamp(self.broker.clock.now(), UTC)

    def advance(self, by: timedelta | float | str) -> datetime:
        """Move a manual clock on by ``by`` (a ``timedelta``, seconds, or ``90s``/``10m``/``2h``/``1d``)
        and fire everything that fell due: locks expire (the message back with its delivery count
        raised, or dead-lettered at MaxDeliveryCount), session locks lapse, messages past their time
        to live are dead-lettered or dropped, scheduled messages become active, the duplicate-detection
        window moves on. Returns the new time. Thread-safe."""
        clock = self.broker.clock
        if not isinstance(clock, ManualClock):
            raise ClockError(MANUAL_CLOCK_HINT)
        seconds = span_seconds(by)
        if seconds < 0:
            raise ValueError("time only moves forward: advance() takes a duration of 0 or more")
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or self.stopped.is_set():
            self._step(clock, seconds, feed=False)  # not serving: no receiver to hand anything to
            return self.now()
        if threading.current_thread() is thread:  # called on the broker's thread itself
            self._step(clock, seconds, feed=True)
            return self.now()
        done = threading.Event()
        failed: list[BaseException] = []

        def step() -> None:
            try:
                self._step(clock, seconds, feed=True)
            except BaseException as exc:  # handed to the caller, whose call it was
                failed.append(exc)
            finally:
                done.set()

        loop.call_soon(step)
        if not done.wait(ADVANCE_TIMEOUT):
            raise ClockError(f"the emulator's thread did not take the step within {ADVANCE_TIMEOUT:g} s")
        if failed:
            raise failed[0]
        return self.now()

    def _step(self, clock: ManualClock, seconds: float, *, feed: bool) -> None:
        with self.broker.lock:  # no operation on another thread (the admin API's) sees half a step
            clock.advance(seconds)
            if feed:
                self._handler.on_tick()  # fire, then hand what came back to waiting receivers
            else:
                self.broker.tick()
