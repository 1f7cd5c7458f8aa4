"""A kernel interrupt that lands at a chosen state of the broker, however loaded the machine: for the
tests of interrupted moves (tests/core/incidents/test_interrupted_moves.py,
tests/notebook/test_interrupted_resubmit.py).

:class:`InterruptWhen` checks a condition on the broker's own thread at the start and at the end of
each of its operations (every send, receive and settlement holds the broker's lock: the watch wraps
that lock). The first time it holds, the broker stops there: the main thread is interrupted (SIGINT
aimed at it, as the kernel's stop button sends it) and the broker stays stopped until the kit logs
that the interrupt reached its run. Nothing is timed: the interrupt reaches the run at exactly that
state of the broker. The states are read from the broker itself, not through the kit.
"""

from __future__ import annotations

import datetime as dt
import logging
import signal
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from sbnotebook.core.operations.copies import ORIGINAL_ID
from sbnotebook.emulator import Emulator
from tests.helpers import (
    InterruptAtFirstProgress,
    QuickCloseClient,
    emulator_config,
    interrupt_main_thread,
    python_sigint,
)

RESUBMIT_LOG = "sbnotebook.core.incidents.resubmit.run"  # "... interrupted: ending the batches in flight"
SEND_LOG = "sbnotebook.send"  # "send to ... interrupted: ending the sends in flight"
DISPOSITIONS = "com.microsoft:update-disposition"  # a settlement of many messages in one request


class _WatchedLock:
    """The broker's lock, with ``check`` run (holding it) as each outermost operation starts and ends."""

    def __init__(self, inner: Any, check: Callable[[], None]) -> None:
        self.inner, self.check = inner, check
        self.depth = 0  # changed only by the thread holding the lock
        self.checking = False

    def acquire(self, *args: Any, **kwargs: Any) -> bool:
        got: bool = self.inner.acquire(*args, **kwargs)
        if got:
            self.depth += 1
            if self.depth == 1:
                self._check()
        return got

    def release(self) -> None:
        try:
            if self.depth == 1:
                self._check()
        finally:
            self.depth -= 1
            self.inner.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _check(self) -> None:
        if self.checking:
            return  # the check itself read the broker under its lock
        self.checking = True
        try:
            self.check()
        finally:
            self.checking = False


class _Said(logging.Handler):
    def __init__(self, heard: threading.Event) -> None:
        super().__init__(logging.INFO)
        self.heard = heard

    def emit(self, record: logging.LogRecord) -> None:
        if "interrupted" in record.getMessage():
            self.heard.set()


@contextmanager
def answered(hook: InterruptAtFirstProgress) -> Iterator[None]:
    """``hook`` (``tests.helpers.InterruptAtFirstProgress``) on an operation that answers an interrupt with
    its Report (it returns: no KeyboardInterrupt reaches the cell): the hook holds the connection's
    thread until the main thread has taken the SIGINT, so the interrupt reaches the run right after
    that call. ``with answered(hook): report = core.copy(..., progress=hook)``."""

    def taken(signum: int, frame: Any) -> None:
        hook.seen.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, taken)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        hook.seen.set()


class InterruptWhen:
    """``with InterruptWhen(emulator, when):`` interrupts the main thread the first time ``when(broker)``
    holds (see the module docstring), or calls ``interrupt`` (a task's cancel); ``ack``: the logger
    whose "interrupted" line says the run took it. ``fired``: whether it did."""

    def __init__(
        self,
        emulator: Emulator,
        when: Callable[[Any], bool],
        ack: str = RESUBMIT_LOG,
        interrupt: Callable[[], None] = interrupt_main_thread,
    ) -> None:
        self.broker, self.when, self.interrupt = emulator.broker, when, interrupt
        self.logger = logging.getLogger(ack)
        self.heard = threading.Event()
        self.handler = _Said(self.heard)
        self.fired = False
        self._sigint = python_sigint()

    def _check(self) -> None:
        if self.fired or not self.when(self.broker):
            return
        self.fired = True
        self.interrupt()
        self.heard.wait(timeout=60)  # the broker stays here until the run took it

    @property
    def acknowledged(self) -> bool:
        """Whether the run said it took the interrupt."""
        return self.heard.is_set()

    def __enter__(self) -> InterruptWhen:
        self._sigint.__enter__()
        self.level = self.logger.level
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self.handler)
        self.lock = self.broker.lock
        self.broker.lock = _WatchedLock(self.lock, self._check)
        return self

    def __exit__(self, *exc: object) -> None:
        self.broker.lock = self.lock
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)
        self._sigint.__exit__(*exc)


def overlap(broker: Any, queue: str, n: int) -> int:
    """How many of the ``n`` messages resubmitted from ``queue``'s dead-letter queue back to it are
    in both places now (the broker's own counts)."""
    counts = broker.counts(queue)
    return int(counts["active"] + counts["dead_letter"] - n)


def between_copy_and_complete(queue: str, n: int) -> Callable[[Any], bool]:
    """As a settlement request starts while copies are in ``queue`` and their originals still in its
    dead-letter queue: the kit saw the copies confirmed, its originals' completion is on its way."""
    return lambda broker: broker.requests[DISPOSITIONS] > 0 and overlap(broker, queue, n) > 0


def receiving_before_any_copy(queue: str) -> Callable[[Any], bool]:
    """Once the first messages are locked for the run, before a copy reached ``queue``."""
    return lambda broker: len(broker.locks.locks) > 0 and broker.counts(queue)["active"] == 0


def copies_at_least(queue: str, copies: int) -> Callable[[Any], bool]:
    """Once ``queue`` holds ``copies`` copies (the last of them not yet confirmed to the kit)."""
    return lambda broker: broker.counts(queue)["active"] >= copies


# ------------------------------------------------ 1,000 dead letters, and where each one is

N = 1000
# No duplicate detection: a copy sent twice would be there twice, and counted.
TOPOLOGY = emulator_config(
    "interrupts", {"q": {"LockDuration": "PT60S", "DeadLetteringOnMessageExpiration": True}, "plain": {}}
)


def dead_letters(emulator: Emulator, n: int = N) -> None:
    """``n`` messages (body ``0000``..., id ``m-0``...) in q's dead-letter queue: expired there."""
    cs = emulator.connection_string
    with QuickCloseClient.from_connection_string(cs) as client, client.get_queue_sender("q") as s:
        for start in range(0, n, 250):
            s.send_messages(
                [
                    ServiceBusMessage(f"{i:04d}", message_id=f"m-{i}", time_to_live=dt.timedelta(seconds=1))
                    for i in range(start, min(start + 250, n))
                ]
            )
    emulator.advance(2)
    assert emulator.broker.counts("q")["dead_letter"] == n


def peek_all(client: ServiceBusClient, queue: str, sub_queue: Any = None) -> list[Any]:
    """Every message of ``queue`` (or its ``sub_queue``), peeked through the SDK."""
    with client.get_queue_receiver(queue, sub_queue=sub_queue) as r:
        found: list[Any] = []
        while True:
            after = found[-1].sequence_number + 1 if found else 0
            page = r.peek_messages(max_message_count=250, sequence_number=after)
            if not page:
                return found
            found.extend(page)


def where_each_is(emulator: Emulator) -> dict[str, Counter[str]]:
    """Through the SDK (not the kit): for each place, each message's original id (a copy names its
    original) with its body, counted. A message locked now fails the test: peeked, it says so."""
    now = dt.datetime.now(dt.UTC)
    places: dict[str, Counter[str]] = {}
    with QuickCloseClient.from_connection_string(emulator.connection_string) as client:
        for place, sub_queue in (("queue", None), ("dlq", ServiceBusSubQueue.DEAD_LETTER)):
            seen: Counter[str] = Counter()
            for m in peek_all(client, "q", sub_queue):
                props = m.application_properties or {}
                original = props.get(ORIGINAL_ID.encode(), props.get(ORIGINAL_ID, m.message_id))
                original = original.decode() if isinstance(original, bytes) else str(original)
                seen[f"{original}={m.body if isinstance(m.body, str) else b''.join(m.body).decode()}"] += 1
                locked = (m.raw_amqp_message.annotations or {}).get(b"x-opt-locked-until")
                assert not locked or dt.datetime.fromtimestamp(locked / 1000, dt.UTC) <= now, f"{place}: {m} locked"
            places[place] = seen
    return places


def exactly_once(places: dict[str, Counter[str]], n: int = N) -> None:
    """Every message exactly once across the places: none lost, none in two places or twice."""
    together = places["queue"] + places["dlq"]
    assert set(together) == {f"m-{i}={i:04d}" for i in range(n)}
    assert max(together.values()) == 1, [k for k, c in together.items() if c > 1][:5]
