"""Due times (lock expiry, schedules, TTL, session locks) in one heap, fired by ``Broker.tick``."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from typing import Any

LOCK = "lock"
SCHEDULED = "scheduled"
TTL = "ttl"
SESSION = "session"
NEVER = 10 * 365 * 86400  # seconds: no TTL timer for messages that effectively never expire


class Timers:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str, Any]] = []
        self._ids = itertools.count()  # ties in due time fire in the order they were set

    def add(self, due: float, kind: str, key: Any) -> None:
        heapq.heappush(self._heap, (due, next(self._ids), kind, key))

    def next_due(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def due(self, now: float) -> Iterator[tuple[float, str, Any]]:
        """Pop and yield (due, kind, key) for every timer at or before ``now`` (a timer added while
        iterating fires in this pass if it is due)."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            due, _, kind, key = heapq.heappop(heap)
            yield due, kind, key
