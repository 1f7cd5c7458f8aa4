"""How a `peek` read is planned (sbnotebook/spark/reading.py): the ranges end at the highest sequence
number present at planning, found in one round trip more than the count when the numbering is dense,
and by a search past holes, below a wrong guess or behind producers. Runs the planner and the
partitions' reads in this process (no JVM) against the emulator, with the real SDK; the same
guarantee through Spark is tested in tests/spark/test_cluster.py and tests/spark/test_connect.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.core import Connection, EntityPath, resolve
from sbnotebook.core.operations.bounds import BOUND_WINDOW
from sbnotebook.emulator import Emulator
from tests.helpers import counted_peeks, send
from tests.required import require_module

require_module("pyspark")
from sbnotebook.spark import reading  # noqa: E402
from sbnotebook.spark.schema import arrow_schema  # noqa: E402


@pytest.fixture
def conn(emulator: Emulator) -> Iterator[Connection]:
    yield resolve(emulator.connection_string)


def read_all(conn: Connection, entity: str, ranges: list[reading.PeekRange]) -> list[int]:
    """What the partitions return, as their tasks would read them."""
    path = EntityPath.parse(entity)
    out: list[int] = []
    for part in ranges:
        for batch in reading.read_peek(conn, path, part, arrow_schema(), in_flight=4):
            out.extend(batch.column("sequence_number").to_pylist())
    return out


def numbers(conn: Connection, entity: str) -> list[int]:
    return core.sequence_numbers(entity, connection=conn)


def test_every_partition_stops_at_the_end_present_at_planning(conn: Connection, client: ServiceBusClient) -> None:
    send(client, "q", *[f"m{i}" for i in range(100)])
    ranges = reading.plan_peek(conn, EntityPath.parse("q"), 1, 4, None)
    assert [(r.first, r.last) for r in ranges] == [(1, 25), (26, 50), (51, 75), (76, 100)]
    send(client, "q", *[f"late{i}" for i in range(60)])  # after planning, before the tasks read
    assert read_all(conn, "q", ranges) == list(range(1, 101))


def test_planning_costs_one_peek_more_than_before(
    conn: Connection, client: ServiceBusClient, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dense numbering: the count and the first number at once (one round trip), then one peek of a
    window at the end (one more). Counted at the broker: every peek the planner makes."""
    send(client, "q", *[f"m{i}" for i in range(500)])
    reading.plan_peek(conn, EntityPath.parse("q"), 1, 4, None)  # opens the connection and links
    peeks = counted_peeks(emulator, monkeypatch)
    ranges = reading.plan_peek(conn, EntityPath.parse("q"), 1, 4, None)
    assert ranges[-1].last == 500
    assert peeks == [(1, 1), (500, BOUND_WINDOW)]


def test_the_end_is_found_past_holes_wider_than_the_window(conn: Connection, client: ServiceBusClient) -> None:
    """100 messages taken out of the middle: the count (100) puts the end at 100, where the window finds
    only the next 32 of the 100 after the hole; the search goes on to the real end."""
    send(client, "q", *[f"m{i}" for i in range(200)])
    with client.get_queue_receiver("q", max_wait_time=2) as receiver:
        got: list[Any] = []
        while len(got) < 200 and (batch := receiver.receive_messages(max_message_count=200, max_wait_time=30)):
            got.extend(batch)
        for m in got:
            (receiver.complete_message if 10 <= m.sequence_number < 110 else receiver.abandon_message)(m)
    ranges = reading.plan_peek(conn, EntityPath.parse("q"), 1, 3, None)
    assert (ranges[0].first, ranges[-1].last) == (1, 200)
    send(client, "q", "late")
    assert read_all(conn, "q", ranges) == [*range(1, 10), *range(110, 201)]


def test_the_end_is_found_below_a_guess_too_far(conn: Connection, client: ServiceBusClient) -> None:
    """From sequence number 150 of 200 the count (200) guesses the end at 349: nothing there, so the
    end is searched below it."""
    send(client, "q", *[f"m{i}" for i in range(200)])
    ranges = reading.plan_peek(conn, EntityPath.parse("q"), 150, 2, None)
    assert (ranges[0].first, ranges[-1].last) == (150, 200)
    send(client, "q", "late")
    assert read_all(conn, "q", ranges) == list(range(150, 201))


def test_a_filtered_subscription_and_a_dead_letter_queue_keep_their_bounds(
    conn: Connection, client: ServiceBusClient
) -> None:
    """A subscription has the topic's numbers, so a filter leaves holes; a dead-letter queue keeps each
    message's number from its queue. Either way the read ends where the entity ended at planning."""
    with client.get_topic_sender("t") as sender:
        sender.send_messages(
            [ServiceBusMessage(f"t{i}", application_properties={"color": "red", "size": i % 8}) for i in range(300)]
        )
    wanted = numbers(conn, "t/subscriptions/sql")
    assert len(wanted) == 148 and wanted[-1] == 296  # sizes 4..7 of every 8
    ranges = reading.plan_peek(conn, EntityPath.parse("t/subscriptions/sql"), 1, 4, None)
    with client.get_topic_sender("t") as sender:
        sender.send_messages([ServiceBusMessage("late", application_properties={"color": "red", "size": 9})])
    assert read_all(conn, "t/subscriptions/sql", ranges) == wanted

    send(client, "q", *[f"m{i}" for i in range(60)])
    with client.get_queue_receiver("q", max_wait_time=2) as receiver:
        got = []
        while len(got) < 60 and (batch := receiver.receive_messages(max_message_count=60, max_wait_time=30)):
            got.extend(batch)
        for m in got:
            (receiver.dead_letter_message if m.sequence_number % 3 == 0 else receiver.abandon_message)(m)
    dlq = "q/$deadletterqueue"
    assert numbers(conn, dlq) == list(range(3, 61, 3))
    ranges = reading.plan_peek(conn, EntityPath.parse(dlq), 1, 2, None)
    assert ranges[-1].last == 60
    assert read_all(conn, dlq, ranges) == list(range(3, 61, 3))
