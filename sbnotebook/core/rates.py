"""The kit's one rate grammar (docs/names.md, Rates) and the token bucket that holds a run to it.

A rate is messages per second over the whole run: ``50/s`` or ``3000/m`` (a number of messages, a
slash, ``s`` or ``m``), or in core a number (messages per second). Every magic flag (``--rate``),
core keyword (``rate=``) and Spark option that takes a rate reads it with ``parse_rate``, refused in
one line naming the forms.

The bucket holds at most ``burst`` tokens (``BURST_SECONDS`` of the rate, at least one): a run never
takes more than ``burst`` at once, so no second's tokens are more than ``rate + burst``. Each step
takes its tokens as late as it can (a send once its sender is free, a resubmit's batch once it is in
hand), so its messages reach the broker about one round trip later, whatever the steps before took.
``max_in_flight`` stays the cap on what is on its way at once: the bucket only says when the next
messages may go.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Awaitable, Callable

from .errors import InvalidInputError

Rate = str | float | int
"""What a parameter taking a rate accepts (``parse_rate``)."""

RATE_FORMS = "messages per second or per minute: 50/s, 3000/m"
"""The forms a rate takes, as every help text and refusal says them."""

BURST_SECONDS = 0.05
"""The bucket's size in seconds of the rate: the most a run takes at once."""

_EPSILON = 1e-9  # of a token
_TEXT = re.compile(r"^(\d+(?:\.\d+)?)\s*/\s*([sm])$", re.I)
_PER = {"s": 1.0, "m": 60.0}


def parse_rate(value: Rate | None, *, name: str = "rate") -> float | None:
    """Messages per second ``value`` means, or None (no rate: as fast as ``max_in_flight`` allows).
    A wrong rate is an ``InvalidInputError`` of one line naming ``name`` and the forms."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        per_second = float(value)
    elif isinstance(value, str) and (found := _TEXT.match(value.strip())):
        per_second = float(found.group(1)) / _PER[found.group(2).lower()]
    else:
        raise InvalidInputError(f"{name} takes {RATE_FORMS}; not {value!r}.")
    if not math.isfinite(per_second) or per_second <= 0:
        raise InvalidInputError(f"{name} takes {RATE_FORMS} (more than 0); not {value!r}.")
    return per_second


def said_rate(per_second: float) -> str:
    """A rate as the grammar writes it: ``200/s``, or per minute below one a second (``30/m``)."""
    if per_second >= 1:
        return f"{per_second:g}/s"
    return f"{per_second * 60:g}/m"


class TokenBucket:
    """Messages per second over a run. ``wait_for(n)`` takes ``n`` tokens (at most ``burst``) when
    they are there, else says how long until they will be; ``take(n)`` waits for them, takers served
    in turn. Tokens are taken when the messages go, never booked ahead: a run held back (a busy
    machine, a slow broker) does not catch up in a rush, it goes on at the rate.

    ``clock`` (seconds, monotonic) and ``sleep`` are injectable: unit tests drive the bucket without
    the machine's clock."""

    def __init__(
        self,
        per_second: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.per_second = per_second
        self.burst = max(1, int(per_second * BURST_SECONDS))
        self.clock, self.sleep = clock, sleep
        self.tokens = float(self.burst)
        self.at = clock()
        self._turns: asyncio.Lock | None = None  # made on the loop that first takes

    def wait_for(self, n: int) -> float:
        """0, and ``n`` tokens (1 to ``burst``) taken, when they are there; else the seconds until
        they will be (nothing taken)."""
        if not 1 <= n <= self.burst:
            raise ValueError(f"take 1 to {self.burst} tokens at once, not {n}")
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self.at) * self.per_second)
        self.at = now
        if self.tokens >= n - _EPSILON:  # a sleep of exactly the time it said can fall a rounding short
            self.tokens -= n
            return 0.0
        return (n - self.tokens) / self.per_second

    async def take(self, n: int) -> None:
        """Wait until ``n`` messages may go (one taker at a time, first come first served)."""
        if self._turns is None:
            self._turns = asyncio.Lock()
        async with self._turns:
            while (delay := self.wait_for(n)) > 0:
                await self.sleep(delay)

    def take_blocking(self, n: int) -> None:
        """``take`` for a caller without a loop (``process``): the thread sleeps until the tokens are there."""
        while (delay := self.wait_for(n)) > 0:
            time.sleep(delay)


def bucket_of(rate: Rate | None, *, name: str = "rate") -> TokenBucket | None:
    """The bucket for ``rate`` (checked: ``parse_rate``), None without a rate."""
    per_second = parse_rate(rate, name=name)
    return None if per_second is None else TokenBucket(per_second)
