"""Structured Streaming with the `servicebus` format: a local[2] SparkSession, the real SDK, the
embedded emulator. The broker's own counts prove when messages are completed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook.emulator import Emulator
from tests.helpers import QuickCloseClient, drain, emulator_config, send
from tests.required import require_module
from tests.spark.helpers import stream

pyspark = require_module("pyspark")
from pyspark.errors import StreamingQueryException  # noqa: E402

from sbnotebook import spark as sbspark  # noqa: E402
from sbnotebook.spark.streaming import ADMISSION_CONTROL  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

STREAM_TOPOLOGY: dict[str, Any] = emulator_config(
    "streamns",
    {
        "in": {"LockDuration": "PT5S"},
        "out": {},
        "poison": {"LockDuration": "PT5S", "MaxDeliveryCount": 3},
        "brief": {"LockDuration": "PT1S", "MaxDeliveryCount": 3},
        "sess": {"RequiresSession": True, "LockDuration": "PT5S"},
    },
)


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(STREAM_TOPOLOGY) as emulator:
        yield emulator
        core.close_all()


@pytest.fixture
def client(emu: Emulator) -> Iterator[ServiceBusClient]:
    with QuickCloseClient.from_connection_string(emu.connection_string) as c:
        yield c


@pytest.fixture
def sp(spark: Any, emu: Emulator) -> Any:
    return sbspark.register(spark, emu.connection_string)


def states(emu: Emulator, entity: str) -> dict[str, int]:
    """What the broker holds, by state (peeking changes nothing)."""
    out: dict[str, int] = {}
    for record in core.peek(entity, max_messages=1000, connection=emu.connection_string):
        out[record["state"]] = out.get(record["state"], 0) + 1
    return out


def run(df: Any, checkpoint: Path, sink: Callable[[Any, int], None], timeout: float = 120) -> Any:
    """Run a query over what is there to its end; return it (its exception, if any, inside)."""
    return finish(df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint)), timeout)


def finish(writer: Any, timeout: float = 120) -> Any:
    """Trigger.AvailableNow to its end on pyspark 4.1+. On 4.0 (no admission control for Python
    sources) AvailableNow takes one micro-batch from this source, so there a processing-time
    trigger runs until everything available is processed (the same batches, one by one)."""
    if ADMISSION_CONTROL:
        query = writer.trigger(availableNow=True).start()
    else:
        query = writer.trigger(processingTime="0 seconds").start()
    try:
        if ADMISSION_CONTROL:
            query.awaitTermination(timeout)
        else:
            query.processAllAvailable()
    except StreamingQueryException:  # the sink's failure: the caller looks at query.exception()
        pass
    finally:
        if query.isActive:
            query.stop()
    return query


def test_messages_reach_the_sink_and_are_completed_only_after_their_batch_commits(
    sp: Any, emu: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    send(client, "in", *[f"m{i}" for i in range(30)])
    seen: list[tuple[int, list[str], dict[str, int]]] = []

    def sink(batch: Any, batch_id: int) -> None:
        bodies = sorted(r.body_text for r in batch.select("body_text").collect())
        seen.append((batch_id, bodies, states(emu, "in")))  # the broker while the batch runs
        batch.write.mode("append").parquet(str(tmp_path / "sink"))

    query = run(stream(sp, "in", maxMessagesPerTrigger=12), tmp_path / "ckpt", sink)
    assert query.exception() is None
    assert [len(b) for _, b, _ in seen] == [12, 12, 6]
    left = 30
    for _, bodies, broker in seen:
        # Nothing of this batch is completed while it runs: all deferred; earlier batches are gone.
        assert broker == {"deferred": len(bodies), **({"active": left - len(bodies)} if left > len(bodies) else {})}
        left -= len(bodies)
    written = sorted(r.body_text for r in sp.read.parquet(str(tmp_path / "sink")).collect())
    assert written == sorted(f"m{i}" for i in range(30))
    assert states(emu, "in") == {}  # the last batch too: completed once it committed


def test_a_query_killed_before_commit_gets_the_batch_again_after_restart(
    sp: Any, emu: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    send(client, "in", *[f"m{i}" for i in range(20)])
    got: list[tuple[int, list[str]]] = []

    def crashing(batch: Any, batch_id: int) -> None:
        bodies = sorted(r.body_text for r in batch.select("body_text").collect())
        got.append((batch_id, bodies))
        if batch_id == 1:
            raise RuntimeError("the job died before the batch committed")

    first = run(stream(sp, "in", maxMessagesPerTrigger=8), tmp_path / "ckpt", crashing)
    assert first.exception() is not None and "died before" in str(first.exception())
    assert [b for b, _ in got] == [0, 1]
    assert states(emu, "in") == {"deferred": 8, "active": 4}  # batch 0 completed, batch 1 kept
    lost_batch = got[1][1]

    again: list[tuple[int, list[str]]] = []

    def sink(batch: Any, batch_id: int) -> None:
        again.append((batch_id, sorted(r.body_text for r in batch.select("body_text").collect())))

    restarted = run(stream(sp, "in", maxMessagesPerTrigger=8), tmp_path / "ckpt", sink)
    assert restarted.exception() is None
    assert again[0] == (1, lost_batch)  # the same batch, the same messages
    delivered = {body for _, bodies in got[:1] + again for body in bodies}
    assert delivered == {f"m{i}" for i in range(20)}
    assert states(emu, "in") == {}


def test_max_messages_per_trigger_caps_every_batch(
    sp: Any, emu: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    send(client, "in", *[f"m{i}" for i in range(25)])
    sizes: list[int] = []
    query = run(
        stream(sp, "in", maxMessagesPerTrigger=4, numPartitions=2),
        tmp_path / "ckpt",
        lambda batch, batch_id: sizes.append(batch.count()),
    )
    assert query.exception() is None
    assert sizes == [4, 4, 4, 4, 4, 4, 1]
    assert states(emu, "in") == {}


def test_write_stream_sends_every_message(sp: Any, emu: Emulator, client: ServiceBusClient, tmp_path: Path) -> None:
    """Queue to queue: read `in` as a stream, write `out` with the settled, capped sends of a batch write."""
    send(client, "in", *[f"m{i}" for i in range(40)])
    query = finish(
        stream(sp, "in", maxMessagesPerTrigger=15)
        .selectExpr("body_text as body", "message_id", "'copied' as subject")
        .writeStream.format("servicebus")
        .option("entity", "out")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
    )
    assert query.exception() is None
    out = drain(client, "out")
    assert sorted(str(m) for m in out) == sorted(f"m{i}" for i in range(40))
    assert {m.subject for m in out} == {"copied"}
    assert states(emu, "in") == {}


def test_a_batch_that_keeps_failing_takes_its_messages_to_the_dead_letter_queue(
    sp: Any, emu: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    """Each read of a batch counts one delivery attempt (fetch, then abandon: the message stays
    deferred). A batch that fails on every restart reaches MaxDeliveryCount (3 here) and its message
    goes to the dead-letter queue; the restarted query then carries on with the rest."""
    send(client, "poison", "ok-0", "bad", "ok-1", "ok-2")
    delivered: list[str] = []

    def sink(batch: Any, batch_id: int) -> None:
        bodies = [r.body_text for r in batch.select("body_text").collect()]
        if "bad" in bodies:
            raise RuntimeError("cannot process 'bad'")
        delivered.extend(bodies)

    failures = 0
    for _ in range(6):
        query = run(stream(sp, "poison", maxMessagesPerTrigger=1), tmp_path / "ckpt", sink)
        if query.exception() is None:
            break
        failures += 1
    assert 2 <= failures <= 3  # 3 on the emulator: receive+defer, then three failing reads
    assert sorted(delivered) == ["ok-0", "ok-1", "ok-2"]
    (dead,) = drain(client, "poison", sub_queue="deadletter", count=1)
    assert str(dead) == "bad" and dead.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert states(emu, "poison") == {}


def test_a_batch_longer_than_the_lock_duration_loses_and_repeats_nothing(
    sp: Any, emu: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    """Deferred messages hold no lock while the batch runs: a batch of 3 s on a 1 s lock neither
    loses its messages nor sees them again (MaxDeliveryCount 3 would dead-letter repeats)."""
    import time

    send(client, "brief", *[f"m{i}" for i in range(10)])
    seen: list[str] = []

    def slow(batch: Any, batch_id: int) -> None:
        seen.extend(r.body_text for r in batch.select("body_text").collect())
        time.sleep(3)

    query = run(stream(sp, "brief", maxMessagesPerTrigger=5), tmp_path / "ckpt", slow)
    assert query.exception() is None
    assert sorted(seen) == sorted(f"m{i}" for i in range(10))  # each once
    assert states(emu, "brief") == {}
    assert drain(client, "brief", sub_queue="deadletter", wait=0.3) == []


def session_states(emu: Emulator, *sessions: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for sid in sessions:
        for record in core.peek("sess", max_messages=100, session_id=sid, connection=emu.connection_string):
            out.setdefault(sid, {}).setdefault(record["state"], 0)
            out[sid][record["state"]] += 1
    return out


def send_sessions(client: ServiceBusClient) -> None:
    for sid, n in (("A", 5), ("B", 3), ("C", 2)):
        send(client, "sess", *[f"{sid}{i}" for i in range(n)], session_id=sid)


def test_a_session_enabled_queue_streams_every_session_with_session_id_star(
    sp: Any, emu: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    send_sessions(client)
    rows: list[tuple[str, str]] = []
    query = run(
        stream(sp, "sess", sessionIds="*", maxMessagesPerTrigger=6, waitSeconds=0.5),
        tmp_path / "ckpt",
        lambda batch, _: rows.extend(
            (r.session_id, r.body_text) for r in batch.select("session_id", "body_text").collect()
        ),
    )
    assert query.exception() is None
    assert sorted(rows) == sorted((b[0], b) for b in [f"A{i}" for i in range(5)] + ["B0", "B1", "B2", "C0", "C1"])
    by_session = {sid: [b for s, b in rows if s == sid] for sid in "ABC"}
    assert all(bodies == sorted(bodies) for bodies in by_session.values())  # in order within a session
    assert session_states(emu, "A", "B", "C") == {}


def test_one_named_session_is_streamed_and_the_others_are_left_alone(
    sp: Any, emu: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    send_sessions(client)
    rows: list[str] = []
    query = run(
        stream(sp, "sess", sessionIds="B", waitSeconds=0.5),
        tmp_path / "ckpt",
        lambda batch, _: rows.extend(r.body_text for r in batch.select("body_text").collect()),
    )
    assert query.exception() is None
    assert sorted(rows) == ["B0", "B1", "B2"]
    assert session_states(emu, "A", "B", "C") == {"A": {"active": 5}, "C": {"active": 2}}


def test_a_session_enabled_queue_without_session_id_says_what_to_set(sp: Any, tmp_path: Path) -> None:
    query = run(stream(sp, "sess"), tmp_path / "ckpt", lambda batch, _: None)
    assert "Set the sessionIds option" in str(query.exception())


@pytest.mark.skipif(not ADMISSION_CONTROL, reason="Trigger.AvailableNow over several batches needs pyspark 4.1+")
def test_available_now_stops_at_what_was_there_and_leaves_later_messages_untouched(
    sp: Any, emu: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    send(client, "in", *[f"early{i}" for i in range(6)])
    seen: list[str] = []

    def sink(batch: Any, batch_id: int) -> None:
        seen.extend(r.body_text for r in batch.select("body_text").collect())
        if batch_id == 0:
            send(client, "in", *[f"late{i}" for i in range(4)])  # after the query started

    query = run(stream(sp, "in", maxMessagesPerTrigger=4), tmp_path / "ckpt", sink)
    assert query.exception() is None
    assert sorted(seen) == sorted(f"early{i}" for i in range(6))
    left = core.peek("in", max_messages=100, connection=emu.connection_string)
    assert sorted(r["body_text"] for r in left) == sorted(f"late{i}" for i in range(4))
    assert {(r["state"], r["delivery_count"]) for r in left} == {("active", 0)}  # given back, not counted


@pytest.mark.skipif(ADMISSION_CONTROL, reason="pyspark 4.0 only: 4.1+ takes everything present")
def test_on_pyspark_4_0_available_now_takes_one_batch_completed_by_the_next_run(
    sp: Any, emu: Emulator, client: ServiceBusClient, tmp_path: Path
) -> None:
    """What docs/spark.md says for pyspark 4.0: Spark asks the source once, so one capped batch per
    run; Spark commits a batch to the source only when it plans the next one, so a run's batch
    stays deferred (recorded in the checkpoint, not lost) until the next run completes it."""
    send(client, "in", *[f"m{i}" for i in range(10)])
    sizes: list[int] = []

    def once() -> None:
        query = (
            stream(sp, "in", maxMessagesPerTrigger=4)
            .writeStream.foreachBatch(lambda batch, batch_id: sizes.append(batch.count()))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None

    once()
    assert sizes == [4] and states(emu, "in") == {"deferred": 4, "active": 6}
    once()
    assert sizes == [4, 4] and states(emu, "in") == {"deferred": 4, "active": 2}  # the first 4 completed
