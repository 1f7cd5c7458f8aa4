"""A resubmit of 1,000 dead letters interrupted (a kernel interrupt, a cancelled task) at a chosen
state of the broker: before any copy, between a batch's copies confirmed and its originals
completed, after 300 copies. Each run returns its Report instead of raising; the broker, read
through the SDK, holds every message exactly once (the queue or its dead-letter queue), none
locked, and the Report's counts are the broker's; ``resume=True`` then moves the rest, once.

The interrupt lands at a state of the broker, not after a time (tests/interrupting.py), and the
emulator's clock is manual: no lock lapses, so a lock given back is the run's doing."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from sbnotebook import core
from sbnotebook.core.incidents.copies import ORIGINAL_ID
from sbnotebook.emulator import Emulator
from tests.helpers import QuickCloseClient, emulator_config, wait_until
from tests.interrupting import (
    InterruptWhen,
    between_copy_and_complete,
    copies_at_least,
    overlap,
    receiving_before_any_copy,
)

N = 1000
DLQ = "q/$deadletterqueue"
# No duplicate detection on q: a copy sent twice would be there twice, and counted.
TOPOLOGY = emulator_config("interrupts", {"q": {"LockDuration": "PT60S", "DeadLetteringOnMessageExpiration": True}})


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(TOPOLOGY, clock="manual") as emu:
        yield emu
        core.close_all()


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


def _peek_all(client: ServiceBusClient, sub_queue: Any) -> list[Any]:
    with client.get_queue_receiver("q", sub_queue=sub_queue) as r:
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
            for m in _peek_all(client, sub_queue):
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


def test_the_checks_fail_on_a_message_lost_doubled_or_locked(emulator: Emulator) -> None:
    """The checks below, on broken states: a message in both places, one gone, one locked."""
    dead_letters(emulator, 4)
    exactly_once(where_each_is(emulator), 4)
    with QuickCloseClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender("q") as s:  # m-0 copied (in both places now)
            s.send_messages(ServiceBusMessage("0000", application_properties={ORIGINAL_ID: "m-0"}))
        with pytest.raises(AssertionError):
            exactly_once(where_each_is(emulator), 4)
        with client.get_queue_receiver("q") as r:  # ... and gone from both
            r.complete_message(r.receive_messages(max_wait_time=5)[0])
        with client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as r:
            r.complete_message(r.receive_messages(max_wait_time=5)[0])
        with pytest.raises(AssertionError):
            exactly_once(where_each_is(emulator), 4)
        with client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as r:
            assert r.receive_messages(max_wait_time=5)  # held while the places are read
            with pytest.raises(AssertionError, match="locked"):
                where_each_is(emulator)


POINTS: dict[str, Callable[[], Callable[[Any], bool]]] = {
    "receiving, before any copy": lambda: receiving_before_any_copy("q"),
    "between copies confirmed and originals completed": lambda: between_copy_and_complete("q", N),
    "after 300 copies": lambda: copies_at_least("q", 300),
}


@pytest.mark.parametrize("point", list(POINTS))
def test_a_resubmit_interrupted_returns_its_report_leaves_each_message_once_and_resumes(
    emulator: Emulator, point: str
) -> None:
    dead_letters(emulator)
    cs = emulator.connection_string
    with InterruptWhen(emulator, POINTS[point]()) as interrupt:
        report = core.resubmit(DLQ, connection=cs)  # returns: no KeyboardInterrupt
    assert interrupt.fired and interrupt.acknowledged
    assert core.interrupted(report) and not report.ok, report
    assert "resume=True" in str(report)
    # None locked: each batch was finished or given back (released: the frames left before the call
    # returned; the broker applies them as it reads them). The clock is manual: no lock lapses.
    wait_until(lambda: emulator.broker._locks == {}, timeout=30, interval=0.01)
    places = where_each_is(emulator)
    exactly_once(places)
    moved = sum(places["queue"].values())
    assert report.count("resubmitted") == moved and report.total == moved, report  # the broker's counts
    assert overlap(emulator.broker, "q", N) == 0
    if point == "receiving, before any copy":
        assert moved == 0
    if point == "between copies confirmed and originals completed":
        assert moved >= 50  # that batch's originals were completed, not given back
    assert moved < N  # stopped before the end
    assert core.resubmit_resume_point(DLQ, connection=cs).moved == moved  # type: ignore[union-attr]

    rest = core.resubmit(DLQ, resume=True, connection=cs)
    assert rest.ok and rest.count("resubmitted") == N - moved, rest
    assert f"resumed: {moved} moved before" in rest.notes
    places = where_each_is(emulator)
    exactly_once(places)
    assert sum(places["queue"].values()) == N and not places["dlq"]
    assert core.resubmit_resume_point(DLQ, connection=cs) is None  # finished: nothing to resume
    with pytest.raises(core.InvalidInputError, match="Nothing to resume"):
        core.resubmit(DLQ, resume=True, connection=cs)
