"""The brake stops within one watch interval of the Nth return, shown by counting, not by the clock.

The watch's wait between two readings (``brake.Watch.sleep``) is replaced by one that waits for the
test's tick: one tick, one reading. The test is the target's consumer (a real SDK receiver): it takes
one copy at a time, dead-letters it if its body says ``"bad": true`` (a third), completes it
otherwise, then lets the watch read once. Each reading is noted with how many had come back before
it. The run (a resubmit, then a copy, at a rate) must stop at the first reading after the Nth
return: exactly one reading from the Nth return to the stop, i.e. within one watch interval, each
wait between readings being that interval (the waits asked for are recorded)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.core.incidents.brake import Watch
from sbnotebook.emulator import Emulator
from tests.core.incidents import test_brake as brake
from tests.helpers import QuickCloseClient
from tests.waiting import wait_until

emulator = brake.emulator  # the namespace on the system clock
N = 5  # stop_if_dead_letters
INTERVAL = 0.25
BRAKE: dict[str, Any] = {"rate": "20/s", "brake": core.Brake(stop_if_dead_letters=N, watch_interval=INTERVAL)}


class Ticks:
    """``Watch.sleep`` replaced: each wait says it began, then lasts until the test's tick."""

    def __init__(self) -> None:
        self.waiting = threading.Event()
        self.tick = threading.Semaphore(0)
        self.asked: list[float] = []  # the intervals the watch asked to wait

    async def sleep(self, seconds: float) -> None:
        self.asked.append(seconds)
        self.waiting.set()
        while not self.tick.acquire(blocking=False):
            await asyncio.sleep(0.005)  # on the run's loop: polls for the tick, keeps the loop free

    def one_reading(self) -> None:
        self.waiting.clear()
        self.tick.release()


def readings_from_the_nth_return_to_the_stop(readings: list[int], n: int) -> int:
    """``readings``: how many had come back before each reading, the last the one the run stopped
    after. How many readings saw the Nth return (the first of them should have stopped the run)."""
    return sum(r >= n for r in readings)


def test_the_count_fails_on_a_brake_one_reading_late() -> None:
    assert readings_from_the_nth_return_to_the_stop([0, 1, 2, 3, 4, 5], 5) == 1
    assert readings_from_the_nth_return_to_the_stop([0, 1, 2, 3, 4, 5, 5], 5) == 2  # read it, ran on
    assert readings_from_the_nth_return_to_the_stop([0, 1, 2, 3], 5) == 0  # stopped with fewer back


def consumed_reading_by_reading(emulator: Emulator, ticks: Ticks, run: threading.Thread) -> list[int]:
    """The test as the target's consumer: one copy settled, then one reading; until the run stops
    (no reading waits any more: the brake fired and the run ended). The readings, as counted."""
    readings: list[int] = []
    returned = 0
    with QuickCloseClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_receiver("plain") as receiver:
            wait_until(lambda: ticks.waiting.is_set() or not run.is_alive())  # the first reading taken
            while ticks.waiting.is_set():
                for message in receiver.receive_messages(max_message_count=1, max_wait_time=5):
                    if json.loads(str(message))["bad"]:
                        receiver.dead_letter_message(message, reason="still bad")
                        returned += 1
                    else:
                        receiver.complete_message(message)
                readings.append(returned)
                ticks.one_reading()
                wait_until(lambda: ticks.waiting.is_set() or not run.is_alive())
    return readings


@pytest.mark.parametrize(
    "move",
    [
        lambda cs: core.resubmit(brake.DLQ, target="plain", **BRAKE, connection=cs),
        lambda cs: core.copy(brake.DLQ, "plain", **BRAKE, connection=cs),
    ],
    ids=["resubmit", "copy"],
)
def test_the_run_stops_at_the_first_reading_after_the_nth_return(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, move: Callable[[str], core.Report]
) -> None:
    brake.dead_letters(emulator)
    ticks = Ticks()
    monkeypatch.setattr(Watch, "sleep", staticmethod(ticks.sleep))
    reports: list[core.Report] = []
    run = threading.Thread(target=lambda: reports.append(move(emulator.connection_string)), daemon=True)
    run.start()
    readings = consumed_reading_by_reading(emulator, ticks, run)
    run.join()
    (report,) = reports
    assert core.braked(report), report
    assert readings_from_the_nth_return_to_the_stop(readings, N) == 1, readings
    assert readings[-1] == N and set(ticks.asked) == {INTERVAL}, (readings, ticks.asked)
    assert report.stats["came_back"] == N  # read once more at the stop: the test settled nothing since
    assert len(ticks.asked) == len(readings)  # no reading after the one that stopped it
