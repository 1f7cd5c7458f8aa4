"""The one rate grammar (``core.parse_rate``) and the token bucket, driven by a clock of the test's
own: no test here waits on the machine's clock."""

from __future__ import annotations

import asyncio

import pytest

from sbnotebook import core
from sbnotebook.core import InvalidInputError, parse_rate
from sbnotebook.core.rates import TokenBucket, said_rate


@pytest.mark.parametrize(
    ("text", "per_second"),
    [("50/s", 50.0), ("3000/m", 50.0), (" 1.5 / S ", 1.5), ("30/m", 0.5), (200, 200.0), (0.5, 0.5), (None, None)],
)
def test_rates_read(text: object, per_second: float | None) -> None:
    assert parse_rate(text) == per_second  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["50", "50/h", "fast", "-5/s", "0/s", "/s", 0, -1, True, float("inf"), [50]])
def test_a_wrong_rate_is_one_line_naming_the_forms(text: object) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_rate(text, name="--rate")  # type: ignore[arg-type]
    message = caught.value.message
    assert message.startswith("--rate takes ") and core.RATE_FORMS in message and "\n" not in message


def test_said_rate_reads_back() -> None:
    for text in ["200/s", "30/m", "1/s"]:
        assert parse_rate(said_rate(parse_rate(text) or 0)) == parse_rate(text)


class Clock:
    """Seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _granted(bucket: TokenBucket, clock: Clock, messages: int, takers: int, stalls: dict[int, float]) -> list[float]:
    """When each of ``messages`` goes, ``takers`` taking a burst each in turn as soon as its previous
    messages went (as concurrent workers do). ``stalls``: before the k-th take the machine stalls
    that many seconds (a busy machine: every taker late)."""
    times: list[float] = []
    ready = [0.0] * takers
    left, k = messages, 0
    while left:
        i = min(range(takers), key=lambda j: ready[j])  # the taker free first asks next
        clock.now = max(clock.now, ready[i]) + stalls.get(k, 0.0)
        n = min(bucket.burst, left)
        while (delay := bucket.wait_for(n)) > 0:
            clock.now += delay  # asleep until the tokens are there
        times += [clock.now] * n
        ready[i] = clock.now
        left -= n
        k += 1
    return times


def most_in_a_second(times: list[float]) -> int:
    """The most of ``times`` in any window of one second (each window starting at one of them)."""
    times = sorted(times)
    j, most = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - 1.0:
            j += 1
        most = max(most, i - j + 1)
    return most


@pytest.mark.parametrize(("rate", "takers"), [(200.0, 1), (200.0, 10), (50.0, 4), (5.0, 3), (1000.0, 10)])
def test_no_second_holds_more_than_the_rate_and_a_burst(rate: float, takers: int) -> None:
    clock = Clock()
    bucket = TokenBucket(rate, clock=clock)
    times = _granted(bucket, clock, int(rate * 10), takers, {})
    assert most_in_a_second(times) <= rate + bucket.burst <= max(1.05 * rate, rate + 1)
    # and the run takes its time: 10 s of messages, less the first burst, at the rate
    assert max(times) == pytest.approx(10 - bucket.burst / rate, abs=1e-6)


def test_a_run_held_back_does_not_catch_up_in_a_rush() -> None:
    """Stalls of 0.3 s and 1 s: the messages after each go on at the rate (the stall is lost time),
    never more than the rate and a burst in a second."""
    clock = Clock()
    bucket = TokenBucket(200.0, clock=clock)
    times = _granted(bucket, clock, 2000, 10, {40: 0.3, 100: 1.0, 101: 1.0})
    assert most_in_a_second(times) <= 200 + bucket.burst
    # the stalls added to the run: each lets the bucket fill again (a burst), no more
    assert max(times) >= 10 + 2.3 - 4 * bucket.burst / 200 - 1e-6


def test_the_check_catches_a_bucket_that_lets_a_burst_through() -> None:
    """The per-second check on a made-up schedule: 2x the rate in one second fails it."""
    burst = [0.5] * 400 + [1.5 + i / 200 for i in range(200)]
    assert most_in_a_second(burst) == 400 > 200 + 10


def test_a_bucket_left_idle_saves_no_more_than_its_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(200.0, clock=clock)
    assert bucket.burst == 10  # a twentieth of a second's worth
    clock.now = 60.0  # a minute idle
    assert bucket.wait_for(10) == 0.0  # taken
    assert bucket.wait_for(10) == pytest.approx(0.05)  # the next burst waits its turn (nothing taken)
    assert bucket.wait_for(1) == pytest.approx(0.005)
    clock.now += 0.005
    assert bucket.wait_for(1) == 0.0


def test_a_slow_rate_takes_one_at_a_time() -> None:
    clock = Clock()
    bucket = TokenBucket(parse_rate("30/m") or 0, clock=clock)
    assert bucket.burst == 1
    assert bucket.wait_for(1) == 0.0
    assert bucket.wait_for(1) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="take 1 to 1 tokens"):
        bucket.wait_for(2)


def test_take_sleeps_until_the_tokens_are_there_takers_in_turn() -> None:
    clock = Clock()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    bucket = TokenBucket(40.0, clock=clock, sleep=sleep)

    async def run() -> None:
        await asyncio.gather(*(bucket.take(2) for _ in range(4)))  # four takers at once, in turn

    asyncio.run(run())
    assert bucket.burst == 2
    assert slept == pytest.approx([0.05, 0.05, 0.05])  # the first take from the full bucket, then 2/40 s each
    assert clock.now == pytest.approx(0.15)
