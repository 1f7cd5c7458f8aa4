"""Snapshot reads (docs/spark.md, "A peek read is a snapshot"), end to end: the same scenarios run on
local-cluster (tests/spark/test_cluster.py) and over Spark Connect (tests/spark/test_connect.py).
Only DataFrame APIs: nothing here touches sparkContext."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from tests.helpers import QuickCloseClient, drain, send

MARKER = "sent-right-after-planning"
PROBE = "servicebus_snapshot_probe"


def register_probe(spark: Any, connection: Any) -> None:
    """The `servicebus` source registered as PROBE, unchanged but for one thing: right after a peek
    read is planned (partitions() returned its ranges, before any task runs), the planning process
    sends one MARKER message to the entity read. A snapshot read must not return it. Defined in a
    function, so that it is pickled by value and reaches Spark's Python workers (as register() does)."""
    from sbnotebook import core
    from sbnotebook.spark.source import ServiceBusDataSource, _Reader

    class ProbeReader(_Reader):
        def partitions(self) -> Any:
            planned = super().partitions()
            report = core.send(self.options.entity, [MARKER], connection=self.options.conn())
            assert report.ok, report
            return planned

    class SnapshotProbe(ServiceBusDataSource):
        @classmethod
        def name(cls) -> str:
            return PROBE

        def defaults(self) -> tuple[Any, int]:
            return connection, 4

        def reader(self, schema: Any) -> Any:
            plain = super().reader(schema)
            return ProbeReader(plain.options, plain.body)

    spark.dataSource.register(SnapshotProbe)


def peek_all(client: ServiceBusClient, entity: str) -> list[Any]:
    """Every message in the entity, by the SDK's own peeks."""
    out: list[Any] = []
    with client.get_queue_receiver(entity) as receiver:
        while page := receiver.peek_messages(max_message_count=250, sequence_number=_after(out)):
            out.extend(page)
    return out


def _after(messages: list[Any]) -> int:
    return messages[-1].sequence_number + 1 if messages else 1


@contextmanager
def producing(connection_string: str, entity: str) -> Iterator[list[int]]:
    """A thread sending batches of 5 messages to `entity` (on a client of its own) until the block
    ends; yields the running count of messages sent."""
    sent = [0]
    stop = threading.Event()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            with (
                QuickCloseClient.from_connection_string(connection_string) as client,
                client.get_queue_sender(entity) as sender,
            ):
                while not stop.is_set():
                    sender.send_messages([ServiceBusMessage(f"p{sent[0] + i}") for i in range(5)])
                    sent[0] += 5
                    time.sleep(0.005)
        except BaseException as exc:  # reported by the test, not lost in the thread
            failed.append(exc)

    thread = threading.Thread(target=run, name="snapshot-producer", daemon=True)
    thread.start()
    try:
        yield sent
    finally:
        stop.set()
        thread.join(30)
    assert not failed, failed


def read_takes_only_what_was_there_at_planning(
    spark: Any, client: ServiceBusClient, connection: Any, connection_string: str
) -> None:
    """A producer sends throughout a 4-partition peek read: the read returns every message present when
    it was planned (a prefix of the queue, without holes), and nothing sent after: not the marker the
    planner sent, and none of the producer's messages that came after it."""
    drain(client, "q", wait=0.2)  # the module's emulator: start from an empty queue
    send(client, "q", *[f"m{i}" for i in range(300)])
    register_probe(spark, connection)
    with producing(connection_string, "q") as sent:
        time.sleep(0.3)  # the producer is well under way before the read is planned
        df = spark.read.format(PROBE).option("entity", "q").option("numPartitions", 4).load()
        rows = df.select("sequence_number", "body_text").collect()
        at_read_end = sent[0]
        time.sleep(0.2)
    present = peek_all(client, "q")
    markers = [m.sequence_number for m in present if str(m) == MARKER]
    assert len(markers) == 1, markers  # planned once
    read = sorted(r.sequence_number for r in rows)
    assert len(read) == len(set(read)), "a message was read twice"
    assert MARKER not in {r.body_text for r in rows}, "the read took a message sent after it was planned"
    assert read[-1] < markers[0]
    assert read == [m.sequence_number for m in present if m.sequence_number <= read[-1]], "holes in the snapshot"
    assert {f"m{i}" for i in range(300)} <= {r.body_text for r in rows}
    after = [m for m in present if m.sequence_number > markers[0]]
    assert after and at_read_end > 0, "the producer was not sending throughout the read"
    drain(client, "q", wait=0.2)  # the module's later tests expect the queue empty


def read_then_write_back_to_the_same_entity(spark: Any, client: ServiceBusClient) -> None:
    """Read, transform, write back to the entity read: the job reads the 200 messages that were there,
    not its own writes, so the queue ends with each original and exactly one copy of it."""
    drain(client, "q", wait=0.2)
    send(client, "q", *[f"m{i}" for i in range(200)])
    df = spark.read.format("servicebus").option("entity", "q").option("numPartitions", 4).load()
    copies = df.selectExpr("concat(body_text, '+copy') as body")
    copies.write.format("servicebus").mode("append").option("entity", "q").save()
    bodies = sorted(str(m) for m in peek_all(client, "q"))
    assert len(bodies) == 400, f"{len(bodies)} messages, {sum('+copy+copy' in b for b in bodies)} copies of copies"
    assert bodies == sorted([f"m{i}" for i in range(200)] + [f"m{i}+copy" for i in range(200)])
    drain(client, "q", wait=0.2)  # the module's later tests expect the queue empty
