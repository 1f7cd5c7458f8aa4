"""``maxMessages`` is at most that many rows in all, whatever the partitions (docs/spark.md): its
shares add up to it, not each rounded up; a time-bounded range counts the rows it keeps, and the
sweep for scheduled messages takes a share too. The reader runs in this process (no JVM), as Spark
would run it, with the real SDK against the emulator; what is left is read back from the broker."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.emulator import Emulator
from tests.helpers import send
from tests.required import require_module

require_module("pyspark")
from sbnotebook.spark.source import ServiceBusDataSource  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def read_all(emulator: Emulator, **options: Any) -> list[str]:
    """Every partition the reader plans, read: the bodies."""
    source = ServiceBusDataSource({"connectionString": emulator.connection_string, **options})
    reader = source.reader(source.schema())
    out: list[str] = []
    for partition in reader.partitions():
        for batch in reader.read(partition):
            out.extend(batch.column("body_text").to_pylist())
    return out


def test_a_peek_takes_at_most_max_messages_across_partitions(client: ServiceBusClient, emulator: Emulator) -> None:
    send(client, "q", *[f"m{i}" for i in range(100)])
    for partitions, most in ((4, 10), (8, 3), (3, 1), (4, 100), (4, 500)):
        got = read_all(emulator, entity="q", numPartitions=partitions, maxMessages=most)
        assert len(got) == len(set(got)) == min(most, 100), (partitions, most)


def test_a_time_bounded_peek_counts_the_rows_it_keeps(client: ServiceBusClient, emulator: Emulator) -> None:
    """Twenty scheduled messages numbered between a and b, enqueued in a minute: peeked within the
    window [a0, c0) and left out, they do not use up its share. The sweep below a window takes a
    share too: from a minute on, only scheduled messages are in the window, found by the sweep."""
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=60)
    with client.get_queue_sender("q") as sender:
        sender.schedule_messages([ServiceBusMessage(f"s{i}") for i in range(5)], later)
    send(client, "q", *[f"a{i}" for i in range(10)])
    with client.get_queue_sender("q") as sender:
        sender.schedule_messages([ServiceBusMessage(f"t{i}") for i in range(20)], later)
    send(client, "q", *[f"b{i}" for i in range(10)])
    time.sleep(0.05)
    send(client, "q", *[f"c{i}" for i in range(10)])
    times = {
        r["body"].decode(): r["enqueued_time"] for r in core.scan_records("q", connection=emulator.connection_string)
    }
    window = {"enqueuedAfter": times["a0"].isoformat(), "enqueuedBefore": times["c0"].isoformat()}
    got = read_all(emulator, entity="q", numPartitions=1, maxMessages=20, **window)
    assert sorted(got) == sorted(f"{g}{i}" for g in "ab" for i in range(10))
    after = (later - dt.timedelta(seconds=1)).isoformat()
    got = read_all(emulator, entity="q", numPartitions=2, maxMessages=12, enqueuedAfter=after)
    assert len(got) == len(set(got)) == 12 and set(got) <= {f"s{i}" for i in range(5)} | {f"t{i}" for i in range(20)}


def test_a_destructive_session_read_deletes_at_most_max_messages(client: ServiceBusClient, emulator: Emulator) -> None:
    """Four sessions of five, four partitions, maxMessages 10: ten messages deleted, not 4 x 3."""
    with client.get_queue_sender("sq60") as sender:
        sender.send_messages([ServiceBusMessage(f"s{i}-{j}", session_id=f"s{i}") for i in range(4) for j in range(5)])
    got = read_all(emulator, entity="sq60", mode="receive_and_delete", numPartitions=4, maxMessages=10, waitSeconds=30)
    assert len(got) == 10
    left = core.counts("sq60", connection=emulator.connection_string)
    assert left.active == 10, left


def test_a_time_bounded_session_peek_counts_the_rows_it_keeps(client: ServiceBusClient, emulator: Emulator) -> None:
    """A session is peeked whole and its rows kept by time: maxMessages counts the rows kept, so the
    messages of each session before the window do not use up the share."""
    with client.get_queue_sender("sq60") as sender:
        sender.send_messages([ServiceBusMessage(f"a{i}", session_id=f"s{i % 2}") for i in range(6)])
        time.sleep(0.05)
        sender.send_messages([ServiceBusMessage(f"b{i}", session_id=f"s{i % 2}") for i in range(6)])
    with client.get_queue_receiver("sq60", session_id="s0") as receiver:
        b0 = next(m.enqueued_time_utc for m in receiver.peek_messages(20) if str(m) == "b0")
    assert b0 is not None
    got = read_all(emulator, entity="sq60", numPartitions=1, maxMessages=4, enqueuedAfter=b0.isoformat())
    assert len(got) == len(set(got)) == 4 and all(b.startswith("b") for b in got), got
