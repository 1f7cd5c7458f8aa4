"""A resubmit, a copy and a send at a rate (``rate="200/s"``), read from the broker: the copies'
enqueued times (stamped by the broker, not said by the kit), counted per second of the run.

The emulator runs on the system clock here (the enqueued times are what is measured). Load on the
machine can only make a run slower, so the checks are the two a slow run never breaks: no second
of the run holds more than 1.2x the rate, and the run takes at least 0.9 of the time the rate
allows. The figure within 10% is measured by ``benchmarks/replay_rate.py`` (docs/benchmarks.md)."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from sbnotebook import core
from sbnotebook.emulator import Emulator
from tests.helpers import QuickCloseClient
from tests.interrupting import TOPOLOGY, exactly_once, peek_all, where_each_is

N = 600
RATE = 200.0
DLQ = "q/$deadletterqueue"


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(TOPOLOGY) as emu:  # the system clock: the broker stamps each copy's enqueued time
        yield emu
        core.close_all()


def dead_letters(emulator: Emulator, n: int = N) -> None:
    """``n`` messages (body ``0000``..., id ``m-0``...) in q's dead-letter queue, dead-lettered by a
    receiver (the clock is the system's: nothing expires on cue)."""
    cs = emulator.connection_string
    with QuickCloseClient.from_connection_string(cs) as client, client.get_queue_sender("q") as s:
        for start in range(0, n, 250):
            s.send_messages(
                [ServiceBusMessage(f"{i:04d}", message_id=f"m-{i}") for i in range(start, min(start + 250, n))]
            )
    while emulator.broker.counts("q")["active"]:
        with core.receive("q", max_messages=250, connection=cs) as batch:
            assert batch.dead_letter(reason="test").ok
    assert emulator.broker.counts("q")["dead_letter"] == n


def per_second(times: list[dt.datetime]) -> list[int]:
    """How many of ``times`` fall in each second of the run (the first at 0 s), in order."""
    start = min(times)
    seconds = Counter(math.floor((t - start).total_seconds()) for t in times)
    return [seconds.get(s, 0) for s in range(max(seconds) + 1)]


def steady(times: list[dt.datetime], rate: float) -> None:
    """No second of the run above 1.2x ``rate``, and the run no faster than 0.9 of what it allows."""
    counts = per_second(times)
    assert max(counts) <= 1.2 * rate, counts
    span = (max(times) - min(times)).total_seconds()
    assert span >= 0.9 * (len(times) / rate - 1), (span, counts)  # the first second may open full


def test_the_checks_fail_on_a_burst_and_on_a_run_too_fast() -> None:
    start = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)
    even = [start + dt.timedelta(seconds=i / RATE) for i in range(N)]
    steady(even, RATE)
    burst = even[:300] + [start + dt.timedelta(seconds=2.5)] * 300  # 300 in the third second
    with pytest.raises(AssertionError):
        steady(burst, RATE)
    fast = [start + dt.timedelta(seconds=i / (2 * RATE)) for i in range(N)]  # twice the rate, even
    with pytest.raises(AssertionError):
        steady(fast, RATE)


def enqueued(emulator: Emulator, queue: str) -> list[dt.datetime]:
    with QuickCloseClient.from_connection_string(emulator.connection_string) as client:
        return [m.enqueued_time_utc for m in peek_all(client, queue)]


def test_a_resubmit_at_a_rate_is_steady_on_the_broker_and_moves_each_message_once(emulator: Emulator) -> None:
    dead_letters(emulator)
    report = core.resubmit(DLQ, rate="200/s", connection=emulator.connection_string)
    assert report.ok and report.count("resubmitted") == N, report
    exactly_once(where_each_is(emulator), N)
    steady(enqueued(emulator, "q"), RATE)


def test_a_copy_and_a_send_at_a_rate_are_steady_on_the_broker(emulator: Emulator) -> None:
    dead_letters(emulator)
    cs = emulator.connection_string
    report = core.copy(DLQ, "plain", rate="12000/m", resume=False, connection=cs)  # 200/s
    assert report.ok and report.count("sent") == N, report
    steady(enqueued(emulator, "plain"), RATE)
    with QuickCloseClient.from_connection_string(cs) as client:  # the source untouched
        assert len(peek_all(client, "q", ServiceBusSubQueue.DEAD_LETTER)) == N
        with client.get_queue_receiver("plain", receive_mode="receiveanddelete") as r:
            while emulator.broker.counts("plain")["active"]:
                r.receive_messages(max_message_count=250, max_wait_time=5)
    sent = core.send("plain", [{"n": i} for i in range(N)], rate=RATE, connection=cs)
    assert sent.ok and sent.count("sent") == N
    steady(enqueued(emulator, "plain"), RATE)


def test_process_at_a_rate_takes_no_more_than_the_rate_in_any_second(emulator: Emulator) -> None:
    """``process(rate=)``: when each message reached the handler (the test's own clock readings),
    counted per second of the run: the same two checks."""
    cs = emulator.connection_string
    core.send("plain", [{"n": i} for i in range(200)], connection=cs)
    seen: list[dt.datetime] = []
    report = core.process("plain", lambda r: seen.append(dt.datetime.now(dt.UTC)), rate="100/s", connection=cs)
    assert report.count("completed") == 200, report
    steady(seen, 100.0)
