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
from tests.helpers import counted_peeks
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


@pytest.mark.servicebus_clock("manual")  # it becomes active when the test says, after the a's however slow
def test_a_scheduled_message_that_became_active_is_renumbered_and_found_by_its_time(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """Service Bus gives a scheduled message a new sequence number when it becomes active ("appended
    to the queue as if it had been enqueued at the current instant", Microsoft's message-sequencing
    page); the emulator does the same (emulator/broker/firing.py). So its number follows the messages
    enqueued before it, and a window over its enqueued time finds it with no sweep below the window
    (the entity holds no scheduled message by then)."""
    due = emulator.now() + dt.timedelta(seconds=1.5)
    with client.get_queue_sender("q") as sender:
        (scheduled_as,) = sender.schedule_messages(ServiceBusMessage("s"), due)
        sender.send_messages([ServiceBusMessage(f"a{i}") for i in range(20)])
    emulator.advance(2)  # fires what fell due before it returns
    assert any(p.body == "s" and p.sequence_number != scheduled_as for p in broker(client))
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


def test_a_window_to_the_end_read_again_is_one_peek_where_a_peek_saw_the_end_and_checks_itself(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """A connection remembers where a peek saw each entity's end; a window to the end (``enqueued_after``
    alone) peeks the page there in its first round, and when that page saw the end and begins before
    the window, it is the read: one peek, no search. Every case where the page cannot say (the
    window starts below it, more arrived than a page since, a scheduled message below it) is
    searched as before: the numbers are always the broker's."""
    groups(client, names="a", size=1000)  # more than a search may leave undecided: probes run
    state = groups(client, names="b", size=150)
    path = core.EntityPath.parse("q")
    conn = core.connect(emulator.connection_string, warm=False)
    try:
        tb = first_time(state, "b")
        cold = window_search.window_bounds(conn, path, 1, bounds.TimeWindow(after=tb))
        assert cold is not None and cold.peeks > 1  # searched: nothing remembered yet
        assert conn.ends[path] == state[-1].sequence_number  # the last page saw the end
        again = window_search.window_bounds(conn, path, 1, bounds.TimeWindow(after=tb))
        assert again is not None and again.peeks == 1 and again.head is not None
        b_only = [
            r["sequence_number"] for r in core.peek("q", max_messages=5000, enqueued_after=tb, connection=conn).records
        ]
        assert b_only == expected(state, after=tb)

        ta = first_time(state, "a")  # the window starts below the remembered page: searched
        wide = window_search.window_bounds(conn, path, 1, bounds.TimeWindow(after=ta))
        assert wide is not None and wide.peeks > 1
        assert [
            r["sequence_number"] for r in core.peek("q", max_messages=5000, enqueued_after=ta, connection=conn).records
        ] == expected(state, after=ta)

        state = groups(client, names="c", size=300)  # more than a page arrived since
        tc = first_time(state, "c")
        assert conn.ends[path] < state[-1].sequence_number - PAGE_SIZE
        arrived = window_search.window_bounds(conn, path, 1, bounds.TimeWindow(after=tc))
        assert arrived is not None and arrived.peeks > 1  # the remembered page was full: searched
        assert [
            r["sequence_number"] for r in core.peek("q", max_messages=5000, enqueued_after=tc, connection=conn).records
        ] == expected(state, after=tc)

        with client.get_queue_sender("q") as sender:  # due in an hour: held below the next messages
            sender.schedule_messages(ServiceBusMessage("s"), dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
        state = groups(client, names="d", size=20)
        td = first_time(state, "d")
        core.peek("q", max_messages=5000, enqueued_after=td, connection=conn)  # a peek sees the end
        held = window_search.window_bounds(conn, path, 1, bounds.TimeWindow(after=td))
        assert held is not None and held.peeks > 1  # a scheduled message may sit below: searched
        assert [
            r["sequence_number"] for r in core.peek("q", max_messages=5000, enqueued_after=td, connection=conn).records
        ] == expected(state, after=td)
    finally:
        conn.close()
