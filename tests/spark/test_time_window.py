"""Time-bounded peek reads (``enqueuedAfter`` / ``enqueuedBefore``, sbnotebook/spark/reading.py and
core/operations/bounds.py): the sequence numbers holding the window are found by bisection at planning, and the
read returns exactly the messages whose enqueued time is in the window, scheduled ones included.
Planner and partitions run in this process (no JVM) against the emulator with the real SDK; the
expected sets come from an independent peek of the whole entity."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.core import Connection, EntityPath, resolve
from sbnotebook.core.operations.bounds import FANOUT, PROBE_PAGE, TimeWindow
from sbnotebook.emulator import Emulator
from tests.helpers import counted_peeks, send
from tests.required import require_module

require_module("pyspark")
from sbnotebook.spark import reading  # noqa: E402
from sbnotebook.spark.options import OptionError, time_option, time_window  # noqa: E402
from sbnotebook.spark.schema import arrow_schema  # noqa: E402


@pytest.fixture
def conn(emulator: Emulator) -> Iterator[Connection]:
    yield resolve(emulator.connection_string)


def read_window(conn: Connection, entity: str, window: TimeWindow, partitions: int = 3) -> list[str]:
    """What the partitions of a windowed read return (bodies), as their tasks would read them."""
    path = EntityPath.parse(entity)
    out: list[str] = []
    for part in reading.plan_peek(conn, path, 1, partitions, None, window):
        for batch in reading.read_peek(conn, path, part, arrow_schema(), in_flight=4):
            out.extend(b.decode() for b in batch.column("body").to_pylist())
    return sorted(out)


def in_window(conn: Connection, entity: str, window: TimeWindow) -> list[str]:
    """The broker's own answer: every message peeked, kept by its enqueued time."""
    return sorted(
        r["body"].decode() for r in core.scan_records(entity, connection=conn) if window.holds(r["enqueued_time"])
    )


def times(conn: Connection, entity: str) -> dict[str, dt.datetime]:
    return {r["body"].decode(): r["enqueued_time"] for r in core.scan_records(entity, connection=conn)}


def schedule(client: ServiceBusClient, body: str, seconds: float) -> None:
    with client.get_queue_sender("q") as sender:
        at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)
        sender.schedule_messages(ServiceBusMessage(body), at)


def groups(client: ServiceBusClient) -> None:
    """Three groups of ten messages, enqueued at distinct times (sleeps between them)."""
    for name in "abc":
        send(client, "q", *[f"{name}{i}" for i in range(10)])
        time.sleep(0.05)


def test_the_window_is_exact_at_both_edges(conn: Connection, client: ServiceBusClient) -> None:
    groups(client)
    t = times(conn, "q")
    window = TimeWindow(t["b0"], t["c0"])  # from b's first (inclusive) to c's first (exclusive)
    assert read_window(conn, "q", window) == in_window(conn, "q", window) == sorted(f"b{i}" for i in range(10))
    from_b9 = TimeWindow(after=t["b9"])  # b was sent in one batch: its messages share b9's time
    assert read_window(conn, "q", from_b9) == in_window(conn, "q", from_b9)
    assert "b9" in in_window(conn, "q", from_b9) and "a9" not in in_window(conn, "q", from_b9)
    past_b9 = TimeWindow(after=t["b9"], after_open=True)  # a pushed-down `>`
    assert read_window(conn, "q", past_b9) == in_window(conn, "q", past_b9) == sorted(f"c{i}" for i in range(10))
    assert read_window(conn, "q", TimeWindow(before=t["a9"] + dt.timedelta(milliseconds=1))) == in_window(
        conn, "q", TimeWindow(before=t["a9"] + dt.timedelta(milliseconds=1))
    )
    later = t["c9"] + dt.timedelta(seconds=1)
    assert read_window(conn, "q", TimeWindow(after=later)) == []
    assert reading.plan_peek(conn, EntityPath.parse("q"), 1, 3, None, TimeWindow(after=later)) == []


def test_scheduled_messages_numbered_before_the_window_are_read(conn: Connection, client: ServiceBusClient) -> None:
    """A scheduled message is numbered when it is scheduled and enqueued when its time comes: here
    s-early (scheduled first: the lowest number) and s-mid (numbered between a and b) are enqueued in
    a minute, inside a window that starts at b. The bisection skips them; the sweep below the window
    finds s-early, which plain bisection would miss."""
    schedule(client, "s-early", 60)
    send(client, "q", *[f"a{i}" for i in range(10)])
    time.sleep(0.05)
    schedule(client, "s-mid", 60)
    send(client, "q", *[f"b{i}" for i in range(10)])
    time.sleep(0.05)
    send(client, "q", *[f"c{i}" for i in range(10)])
    t = times(conn, "q")
    open_ended = TimeWindow(after=t["b0"])
    got = read_window(conn, "q", open_ended)
    assert got == in_window(conn, "q", open_ended)
    assert {"s-early", "s-mid"} <= set(got) and not any(b.startswith("a") for b in got)
    closed = TimeWindow(t["b0"], t["c0"])  # the scheduled ones are enqueued after it: left out
    assert read_window(conn, "q", closed) == in_window(conn, "q", closed) == sorted(f"b{i}" for i in range(10))
    until_then = TimeWindow(t["b0"], t["s-early"] + dt.timedelta(seconds=1))
    assert read_window(conn, "q", until_then) == in_window(conn, "q", until_then)


def test_planning_costs_a_few_peeks_not_a_scan(
    conn: Connection, client: ServiceBusClient, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2,000 messages in four groups: a window around the third takes a few rounds of at most
    ``FANOUT`` small peeks per bound (counted at the broker: log17(2000), 3 rounds), not a scan."""
    for g in range(4):
        send(client, "q", *[f"g{g}-{i}" for i in range(500)])
        time.sleep(0.05)
    t = times(conn, "q")
    window = TimeWindow(t["g2-0"], t["g3-0"])
    reading.plan_peek(conn, EntityPath.parse("q"), 1, 4, None)  # opens the connection and links
    peeks = counted_peeks(emulator, monkeypatch)
    ranges = reading.plan_peek(conn, EntityPath.parse("q"), 1, 4, None, window)
    assert (ranges[0].first, ranges[-1].last) == (1001, 1500)
    # The snapshot's two, then per bound at most 3 rounds of FANOUT probes (one more for the end's
    # neighbour), each peeking PROBE_PAGE messages: fewer than the 2,000 a scan peeks.
    assert len(peeks) <= 2 + 2 * (3 * FANOUT + 1) and all(count <= PROBE_PAGE for _, count in peeks[2:]), peeks
    assert sum(count for _, count in peeks[2:]) < 2000, peeks
    monkeypatch.undo()
    assert read_window(conn, "q", window, 4) == sorted(f"g2-{i}" for i in range(500))


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("2026-11-25", dt.datetime(2026, 11, 25, tzinfo=dt.UTC)),
        ("2026-11-25T08:30:00", dt.datetime(2026, 11, 25, 8, 30, tzinfo=dt.UTC)),  # no zone: UTC
        ("2026-11-25T08:30:00Z", dt.datetime(2026, 11, 25, 8, 30, tzinfo=dt.UTC)),
        ("2026-11-25T09:30:00+01:00", dt.datetime(2026, 11, 25, 8, 30, tzinfo=dt.UTC)),
        ("2h", dt.datetime(2026, 11, 25, 6, 30, tzinfo=dt.UTC)),  # an age: that long before the planning
        ("90m", dt.datetime(2026, 11, 25, 7, 0, tzinfo=dt.UTC)),
    ],
)
def test_times_are_core_s_grammar(given: str, expected: dt.datetime) -> None:
    now = dt.datetime(2026, 11, 25, 8, 30, tzinfo=dt.UTC)
    assert time_option({"enqueuedAfter": given}, "enqueuedAfter", now) == expected == core.parse_time(given, now=now)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("yesterday", "'yesterday'."),
        ("1795595400", "(seconds since the epoch are taken nowhere: 1795595400 is 2026-11-25T08:30:00Z)."),
        ("+2h", "(that is in the future: 2h ago is 2h)."),
    ],
)
def test_bad_times_are_refused_in_one_line_naming_the_forms(given: str, says: str) -> None:
    with pytest.raises(OptionError) as refused:
        time_option({"enqueuedAfter": given}, "enqueuedAfter")
    text = str(refused.value)
    assert text.startswith(f"servicebus: option enqueuedAfter takes {core.TIME_FORMS}; not ") and text.endswith(says)
    assert "\n" not in text


def test_a_window_s_ends_are_ordered() -> None:
    with pytest.raises(OptionError, match="must be before enqueuedBefore"):
        time_window({"enqueuedAfter": "2026-11-25", "enqueuedBefore": "2026-11-24"})
