"""How a window's sequence numbers are found (issue 53, point 5: the cost; point 2's scheduled
messages): enqueued times far from linear in the numbers (bursts with gaps), where the search's
interpolated guesses miss and its probes must still find the exact edges; a scheduled message that
became active. The expected numbers come from the SDK's own peek of every message."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.core.operations import bounds, window_search
from sbnotebook.core.operations.scan import PAGE_SIZE
from sbnotebook.emulator import Emulator
from tests.helpers import counted_peeks, wait_until
from tests.windows import Peeked, broker, dead_letter_every_tenth, first_time, groups

BURSTS = (120, 3, 150, 1, 2, 90, 40)  # messages per batch (one enqueued time each), 50 ms apart


def numbers(cs: str, **window: Any) -> list[int]:
    page = core.peek("q", max_messages=1000, connection=cs, **window)
    return [int(r["sequence_number"]) for r in page.records]


def expected(state: list[Peeked], after: dt.datetime | None = None, before: dt.datetime | None = None) -> list[int]:
    return [
        p.sequence_number
        for p in state
        if (after is None or p.enqueued >= after) and (before is None or p.enqueued < before)
    ]


def test_bursts_with_gaps_mislead_the_interpolation_and_the_edges_stay_exact(
    emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of 1 to 150 messages sharing one time each, 50 ms apart: the times jump at each batch,
    so a guess from two probed messages' times lands inside a batch, not at its start. With few probes
    per round and no slack, the search goes round after round from such guesses; every window's
    numbers must still be exactly the broker's."""
    for i, size in enumerate(BURSTS):
        with client.get_queue_sender("q") as sender:
            sender.send_messages([ServiceBusMessage(f"{i}-{k}") for k in range(size)])
        time.sleep(0.05)
    state = broker(client)
    starts = sorted({p.enqueued for p in state})
    assert len(starts) == len(BURSTS) and len(state) == sum(BURSTS)
    monkeypatch.setattr(bounds, "FANOUT", 8)  # 8 probes a round: the guess and its neighbours, 4 even
    monkeypatch.setattr(window_search, "SLACK", 0)  # exact edges: the search does not stop early
    guesses: list[tuple[int, dt.datetime]] = []
    real = bounds._interpolated

    def recorded(below: Any, above: Any, target: Any) -> int | None:
        guess = real(below, above, target)
        if guess is not None:
            guesses.append((guess, target))
        return guess

    monkeypatch.setattr(bounds, "_interpolated", recorded)
    cs = emulator.connection_string
    for k, t in enumerate(starts):
        assert numbers(cs, enqueued_after=t) == expected(state, after=t), k
        assert numbers(cs, enqueued_before=t) == expected(state, before=t), k
        for u in starts[k + 1 :]:
            assert numbers(cs, enqueued_after=t, enqueued_before=u) == expected(state, t, u), (k, u)
        middle = t + dt.timedelta(milliseconds=20)  # inside a gap: no message has that time
        assert numbers(cs, enqueued_after=middle) == expected(state, after=middle), k
    edge = {t: min(p.sequence_number for p in state if p.enqueued >= t) for t in starts}
    missed = [(g, t) for g, t in guesses if t in edge and g != edge[t]]
    assert missed, "every guess was right: the bursts did not exercise the search past a wrong guess"


def test_a_scheduled_message_that_became_active_is_renumbered_and_found_by_its_time(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """Service Bus gives a scheduled message a new sequence number when it becomes active ("appended
    to the queue as if it had been enqueued at the current instant", Microsoft's message-sequencing
    page); the emulator does the same (emulator/broker/firing.py). So its number follows the messages
    enqueued before it, and a window over its enqueued time finds it with no sweep below the window
    (the entity holds no scheduled message by then)."""
    due = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1.5)
    with client.get_queue_sender("q") as sender:
        (scheduled_as,) = sender.schedule_messages(ServiceBusMessage("s"), due)
        sender.send_messages([ServiceBusMessage(f"a{i}") for i in range(20)])

    def active() -> bool:
        return any(p.body == "s" and p.sequence_number != scheduled_as for p in broker(client))

    wait_until(active, timeout=15, interval=0.1)
    with client.get_queue_sender("q") as sender:
        sender.send_messages([ServiceBusMessage(f"b{i}") for i in range(20)])
    state = broker(client)
    s = next(p for p in state if p.body == "s")
    assert s.sequence_number > max(p.sequence_number for p in state if p.body.startswith("a")) > scheduled_as
    cs = emulator.connection_string
    assert core.counts("q", connection=cs).scheduled == 0
    assert numbers(cs, enqueued_after=s.enqueued) == expected(state, after=s.enqueued)
    assert s.sequence_number in numbers(cs, enqueued_after=s.enqueued)
    later = s.enqueued + dt.timedelta(microseconds=1000)
    assert numbers(cs, enqueued_before=later) == expected(state, before=later)


def test_a_sparse_dead_letter_queue_s_window_is_read_in_windows_as_wide_as_its_numbers_are_sparse(
    emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every tenth of 1,500 messages dead-lettered: the dead-letter queue holds a tenth of the numbers
    it spans. Its window is read with all its windows at once, each sized from the count over the
    span (about a page of messages, 2,500 numbers), not a page of numbers: one peek of a page, where
    windows 250 numbers wide would each bring back the same messages beyond them."""
    state = groups(client, size=500)
    dead_letter_every_tenth(client, 1500, 250)
    dlq = broker(client, sub_queue="deadletter")
    assert len(dlq) == 150 and dlq[-1].sequence_number - dlq[0].sequence_number > 1400
    tc = first_time(state, "c")
    peeks = counted_peeks(emulator, monkeypatch)
    page = core.peek("q/$deadletterqueue", max_messages=1000, enqueued_before=tc, connection=emulator.connection_string)
    assert [r["sequence_number"] for r in page.records] == [p.sequence_number for p in dlq if p.enqueued < tc]
    assert len(page.records) == 100
    reads = [p for p in peeks if p[1] == PAGE_SIZE]  # the probes peek 4, the end's check 32
    assert len(reads) == 1, peeks
