"""The `servicebus` Spark data source: one local[2] SparkSession, the real SDK, the embedded emulator."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.core import close_all
from sbnotebook.emulator import Emulator, ManualClock
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import HttpOnlyProxy, QuickCloseClient, drain, send
from tests.required import require_module
from tests.spark.helpers import read
from tests.windows import broker, naive_utc_text

pyspark = require_module("pyspark")
from sbnotebook import spark as sbspark  # noqa: E402
from sbnotebook.spark import registered  # noqa: E402

pytestmark = pytest.mark.slow


def error_text(exc: BaseException) -> str:
    return str(exc)


# ------------------------------------------------------------------ reading


def test_peek_reads_every_message_once_across_partitions_and_changes_nothing(
    sp: Any, client: ServiceBusClient, emulator: Emulator
) -> None:
    send(client, "q", *[f"m{i}" for i in range(600)])
    with client.get_queue_receiver("q") as r:  # holes in the sequence-number range
        got = r.receive_messages(max_message_count=50, max_wait_time=5)
        for m in got[::2]:
            r.complete_message(m)
        for m in got[1::2]:
            r.abandon_message(m)
    df = read(sp, "q", numPartitions=4)
    assert df.rdd.getNumPartitions() == 4
    rows = df.select("sequence_number", "body_text", "delivery_count").collect()
    seqs = [r.sequence_number for r in rows]
    assert len(seqs) == len(set(seqs)) == 600 - 25
    assert {r.body_text for r in rows} == {f"m{i}" for i in range(600)} - {f"m{i}" for i in range(0, 50, 2)}
    per_partition = df.rdd.mapPartitions(lambda it: [sum(1 for _ in it)]).collect()
    assert len(per_partition) == 4 and all(n > 0 for n in per_partition) and sum(per_partition) == 575
    again = core.peek("q", max_messages=1000, connection=emulator.connection_string)
    assert len(again) == 575
    assert max(r["delivery_count"] for r in again) == 1  # only the ones abandoned above: peeks count nothing
    assert df.schema.simpleString().startswith("struct<body_text:string,application_properties:map<string,string>")


def test_peek_options_from_sequence_number_max_messages_and_dead_letter_queue(
    sp: Any, client: ServiceBusClient
) -> None:
    send(client, "q", *[f"m{i}" for i in range(100)])
    assert read(sp, "q", fromSequenceNumber=91).count() == 10
    assert read(sp, "q", maxMessages=10, numPartitions=1).count() == 10
    with client.get_queue_receiver("q") as r:
        for m in r.receive_messages(max_message_count=3, max_wait_time=5):
            r.dead_letter_message(m, reason="bad", error_description="why")
    dlq = read(sp, "q/$deadletterqueue").select("dead_letter_reason", "body_text").collect()
    assert sorted((r.dead_letter_reason, r.body_text) for r in dlq) == [("bad", "m0"), ("bad", "m1"), ("bad", "m2")]
    assert read(sp, "once").count() == 0  # an empty entity is an empty DataFrame, not a hang


def test_peek_between_enqueued_times_through_spark(sp: Any, client: ServiceBusClient, emulator: Emulator) -> None:
    """enqueuedAfter (ISO 8601 with a zone) and enqueuedBefore (ISO 8601 without one: UTC) as Spark
    options: exactly the middle group, as an independent peek of the broker says."""
    for name in "abc":
        send(client, "q", *[f"{name}{i}" for i in range(20)])
        time.sleep(0.05)
    t = {
        r["body"].decode(): r["enqueued_time"]
        for r in core.peek("q", max_messages=100, connection=emulator.connection_string).records
    }
    df = read(sp, "q", enqueuedAfter=t["b0"].isoformat(), enqueuedBefore=naive_utc_text(t["c0"]), numPartitions=3)
    assert sorted(r.body_text for r in df.select("body_text").collect()) == sorted(f"b{i}" for i in range(20))


def test_enqueued_after_2h_is_two_hours_ago_as_in_core_and_the_magics(spark: Any) -> None:
    """The time grammar of the whole kit (core.parse_time, docs/names.md Times) in a Spark read: with
    the emulator's manual clock started three hours back, 'old' is enqueued three hours ago and 'new'
    one hour ago (the broker's own peek says so); ``enqueuedAfter=2h`` reads only 'new', as
    ``core.peek(enqueued_after="2h")`` does, and an ISO 8601 time between them the same. Epoch
    seconds are refused at planning, in one line, as everywhere."""
    with Emulator(TEST_TOPOLOGY, clock=ManualClock(time.time() - 3 * 3600)) as emu:
        try:
            cs = emu.connection_string
            session = sbspark.register(spark, cs)
            with QuickCloseClient.from_connection_string(cs) as client:
                send(client, "q", "old")
                emu.advance("2h")
                send(client, "q", "new")
                enqueued = {p.body: p.enqueued for p in broker(client)}
            assert enqueued["old"] < core.parse_time("2h") < enqueued["new"]
            middle = naive_utc_text(enqueued["old"] + dt.timedelta(hours=1))
            for given in ("2h", "120m", middle):
                df = read(session, "q", enqueuedAfter=given, numPartitions=2)
                assert [r.body_text for r in df.select("body_text").collect()] == ["new"], given
                assert [r["body_text"] for r in core.peek("q", enqueued_after=given, connection=cs).records] == ["new"]
                df = read(session, "q", enqueuedBefore=given, numPartitions=2)
                assert [r.body_text for r in df.select("body_text").collect()] == ["old"], given
            epoch = str(int(enqueued["new"].timestamp()))
            with pytest.raises(Exception) as refused:
                read(session, "q", enqueuedAfter=epoch).collect()
            said = f"servicebus: option enqueuedAfter takes {core.TIME_FORMS}; not '{epoch}'"
            assert said in error_text(refused.value)
        finally:
            close_all()


def test_a_misspelt_option_fails_at_planning_and_deletes_nothing(
    sp: Any, client: ServiceBusClient, emulator: Emulator
) -> None:
    """maxMesages (sic) with receive-and-delete: refused before any job, in one line with the closest
    name, instead of draining up to the default 1,000; the broker still holds all 30 messages."""
    send(client, "q", *[f"m{i}" for i in range(30)])
    with pytest.raises(Exception) as err:
        read(sp, "q", mode="receive_and_delete", maxMesages=10).collect()
    last = error_text(err.value).strip().splitlines()
    assert any(
        "servicebus: unknown option 'maxmesages' for a read or stream: did you mean maxMessages?" in line
        for line in last
    )
    assert len(core.peek("q", max_messages=100, connection=emulator.connection_string)) == 30
    with pytest.raises(Exception, match="did you mean maxMessagesPerTrigger"):
        sp.readStream.format("servicebus").option("entity", "q").option("maxMessagesPerTriger", 5).load()


def test_read_and_write_over_websockets_where_only_http_gets_through(
    sp: Any, client: ServiceBusClient, emulator: Emulator
) -> None:
    """The option websockets=true: the driver and every read and write task dial AMQP inside
    WebSockets, through a stand-in firewall that closes AMQP connections (tests/helpers.py)."""
    assert emulator.port is not None
    firewall = HttpOnlyProxy(emulator.port)
    try:
        behind = firewall.connection_string(emulator)
        send(client, "q", *[f"w{i}" for i in range(20)])
        df = read(sp, "q", connectionString=behind, websockets="true", numPartitions=2)
        assert sorted(r.body_text for r in df.collect()) == sorted(f"w{i}" for i in range(20))
        rows = sp.createDataFrame([(f"out{i}",) for i in range(5)], "body string")
        rows.write.format("servicebus").option("entity", "once").option("connectionString", behind).option(
            "websockets", "true"
        ).mode("append").save()
        assert emulator.broker.counts("once")["active"] == 5 and firewall.blocked == 0
        with pytest.raises(Exception):  # noqa: B017 - without WebSockets the tasks cannot connect: any failure
            read(sp, "q", connectionString=behind).collect()
        assert firewall.blocked >= 1
    finally:
        firewall.close()


def test_peek_keeps_properties_and_binary_bodies(sp: Any, client: ServiceBusClient) -> None:
    with client.get_queue_sender("q") as s:
        s.send_messages(ServiceBusMessage(b"\x00\xff\x10", subject="bin", application_properties={"k": "v", "n": 5}))
    row = read(sp, "q").collect()[0]
    assert bytes(row.body) == b"\x00\xff\x10" and row.subject == "bin"
    assert row.application_properties == {"k": "v", "n": "5"}
    assert row.enqueued_time is not None and row.state == "active"


def test_receive_and_delete_drains(sp: Any, client: ServiceBusClient) -> None:
    send(client, "q", *[f"m{i}" for i in range(300)])
    df = read(sp, "q", mode="receive_and_delete", maxMessages=1000, numPartitions=2, waitSeconds=1)
    bodies = [r.body_text for r in df.select("body_text").collect()]
    assert sorted(bodies) == sorted(f"m{i}" for i in range(300))
    assert drain(client, "q", wait=0.5) == []


# ------------------------------------------------------------------ defer, then settle


def test_defer_then_settle_after_success(sp: Any, client: ServiceBusClient, emulator: Emulator) -> None:
    send(client, "q", *[f"m{i}" for i in range(120)])
    df = read(sp, "q", mode="defer", maxMessages=80, numPartitions=2, waitSeconds=2).cache()
    rows = df.select("sequence_number", "state").collect()
    assert len(rows) == 80 and {r.state for r in rows} == {"deferred"}
    states = [r["state"] for r in core.peek("q", max_messages=500, connection=emulator.connection_string)]
    assert states.count("deferred") == 80 and states.count("active") == 40
    report = sbspark.settle(df, "complete")
    assert (report.count("completed"), report.failed, report.count("not_found")) == (80, 0, 0)
    left = core.peek("q", max_messages=500, connection=emulator.connection_string)
    assert len(left) == 40 and {r["state"] for r in left} == {"active"}
    again = sbspark.settle(df, "complete")  # settling twice finds nothing left: reported, not an error
    assert (again.count("completed"), again.count("not_found")) == (0, 80)


def test_a_failed_job_between_read_and_settle_loses_nothing(
    sp: Any, client: ServiceBusClient, emulator: Emulator
) -> None:
    from pyspark.sql import functions as F

    send(client, "q", *[f"m{i}" for i in range(30)])
    df = read(sp, "q", mode="defer", maxMessages=30, numPartitions=2, waitSeconds=2).cache()
    assert df.count() == 30

    @F.udf("string")
    def downstream(text: str) -> str:
        raise RuntimeError("the downstream work failed")

    with pytest.raises(Exception, match="downstream work failed"):
        df.select(downstream("body_text")).collect()
    peeked = core.peek("q", max_messages=100, connection=emulator.connection_string)
    assert len(peeked) == 30 and {r["state"] for r in peeked} == {"deferred"}
    report = sbspark.requeue(df)
    assert report.count("completed") == 30
    back = drain(client, "q")
    assert sorted(str(m) for m in back) == sorted(f"m{i}" for i in range(30))


def test_settle_dead_letters_with_reason_and_resubmits_elsewhere(
    sp: Any, client: ServiceBusClient, emulator: Emulator
) -> None:
    send(client, "q", *[f"m{i}" for i in range(10)])
    df = read(sp, "q", mode="defer", maxMessages=10, numPartitions=1, waitSeconds=2).cache()
    bad = df.where("body_text in ('m1', 'm2')")
    good = df.where("body_text not in ('m1', 'm2')")
    dead = sbspark.settle(bad, "dead_letter", reason="bad-row", description="failed validation")
    assert dead.count("dead_lettered") == 2
    assert sbspark.settle(good, "resubmit", target="once").count("completed") == 8
    dlq = drain(client, "q", sub_queue="deadletter")
    assert sorted((str(m), m.dead_letter_reason) for m in dlq) == [("m1", "bad-row"), ("m2", "bad-row")]
    moved = drain(client, "once")
    assert len(moved) == 8 and all(m.application_properties[b"sbnotebook-resubmit-count"] == 1 for m in moved)
    assert drain(client, "q", wait=0.5) == []
    with pytest.raises(ValueError, match="action must be one of"):
        sbspark.settle(df, "delete")  # type: ignore[arg-type]


# ------------------------------------------------------------------ writing


def test_write_delivers_every_row_with_its_properties(sp: Any, client: ServiceBusClient) -> None:
    from pyspark.sql import functions as F

    df = sp.range(2000).select(
        F.concat(F.lit("row-"), F.col("id").cast("string")).alias("body"),
        F.concat(F.lit("id-"), F.col("id").cast("string")).alias("message_id"),
        F.lit("result").alias("subject"),
        F.create_map(F.lit("part"), (F.col("id") % 3).cast("string")).alias("application_properties"),
    )
    summary = sbspark.write(df.repartition(3), "q", max_in_flight=8)
    assert (summary.count("sent"), summary.total, summary.stats["tasks"]) == (2000, 2000, 3)
    assert summary.ok and "2000 sent" in str(summary)
    got = drain(client, "q")
    assert sorted(str(m) for m in got) == sorted(f"row-{i}" for i in range(2000))
    first = next(m for m in got if str(m) == "row-4")
    assert first.message_id == "id-4" and first.subject == "result"
    assert first.application_properties == {b"part": b"1"}


def test_write_binary_bodies_through_the_plain_format(sp: Any, client: ServiceBusClient) -> None:
    df = sp.createDataFrame([(bytearray(b"\x00\x01"),), (bytearray(b"\xff"),)], "body binary")
    df.write.format("servicebus").mode("append").option("entity", "q").save()
    assert sorted(b"".join(m.body) for m in drain(client, "q")) == [b"\x00\x01", b"\xff"]


def test_write_reports_send_failures_with_conditions_and_tracking_ids(
    sp: Any, emulator: Emulator, client: ServiceBusClient
) -> None:
    emulator.reject_sends("q", 1, "quota-exceeded")
    df = sp.createDataFrame([("a",), ("b",)], "body string").coalesce(1)
    with pytest.raises(Exception) as info:
        df.write.format("servicebus").mode("append").option("entity", "q").option("onePerSend", "true").save()
    text = error_text(info.value)
    assert "messages to q failed" in text and "quota-exceeded" in text.lower().replace(
        "quotaexceeded", "quota-exceeded"
    )
    assert "tracking id" in text


def test_bad_options_and_columns_fail_before_any_job(sp: Any, client: ServiceBusClient) -> None:
    jobs_before = len(sp.sparkContext.statusTracker().getJobIdsForGroup())
    cases = [
        (lambda: read(sp, "q", mode="sideways").collect(), "option mode must be one of"),
        (lambda: read(sp, "nosuch").collect(), "entity not found: nosuch"),
        (lambda: sp.read.format("servicebus").load().collect(), "the 'entity' option is required"),
        (lambda: read(sp, "q", numPartitions=0).collect(), "numPartitions must be 1 or more"),
    ]
    good = sp.createDataFrame([("a", 1)], "body string, n int")
    no_body = sp.createDataFrame([("a",)], "text string")
    wrong_type = sp.createDataFrame([(1,)], "body int")
    for frame, expected in [
        (good, "unknown column 'n'"),
        (no_body, "a write needs a 'body' column"),
        (wrong_type, "column 'body' is int; it must be string or binary"),
    ]:
        cases.append(
            (
                lambda f=frame: f.write.format("servicebus").mode("append").option("entity", "q").save(),
                expected,
            )
        )
    cases.append(
        (
            lambda: (
                sp.createDataFrame([("a",)], "body string")
                .write.format("servicebus")
                .mode("append")
                .option("entity", "t/subscriptions/all")
                .save()
            ),
            "write to a queue or a topic",
        )
    )
    for run, expected in cases:
        with pytest.raises(Exception) as info:
            run()
        assert expected in error_text(info.value)
    assert len(sp.sparkContext.statusTracker().getJobIdsForGroup()) == jobs_before
    assert drain(client, "q", wait=0.3) == []


def test_the_key_never_appears_in_plans_or_errors(spark: Any) -> None:
    key = "TopSecretKey0123456789abcdef"
    with Emulator(config=TEST_TOPOLOGY, key=key) as emu:
        conn_str = emu.connection_string
        assert key in conn_str
        sbspark.register(spark)  # a default without the key; the option below carries it
        df = spark.read.format("servicebus").option("connectionString", conn_str).option("entity", "q").load()
        plan = df._jdf.queryExecution().toString()
        assert "servicebus" in plan.lower() and key not in plan
        df.count()
        plans = [spark.sparkContext._jsc.sc().getConf().toDebugString()]
        assert all(key not in p for p in plans)
        with pytest.raises(Exception) as info:
            spark.read.format("servicebus").option("connectionString", conn_str).option(
                "entity", "nosuch"
            ).load().count()
        assert key not in str(info.value)
        bad = conn_str.replace("Endpoint=sb://", "Endpoint=sb://127.0.0.1:1;x=")
        with pytest.raises(Exception) as info:
            spark.read.format("servicebus").option("connectionString", bad).option("entity", "q").load().count()
        assert key not in str(info.value)
        assert key not in repr(registered.default())


def test_streaming_sink_sends_each_micro_batch(sp: Any, client: ServiceBusClient, tmp_path: Path) -> None:
    incoming = tmp_path / "in"
    incoming.mkdir()
    for i in range(3):
        (incoming / f"part{i}.json").write_text("\n".join(json.dumps({"body": f"s{i}-{j}"}) for j in range(5)))
    stream = sp.readStream.schema("body string").json(str(incoming))
    query = (
        stream.writeStream.format("servicebus")
        .option("entity", "q")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(str(m) for m in drain(client, "q")) == sorted(f"s{i}-{j}" for i in range(3) for j in range(5))


def test_to_spark_and_back(sp: Any, client: ServiceBusClient, emulator: Emulator) -> None:
    send(client, "q", "a", "b", "c")
    page = core.peek("q", connection=emulator.connection_string)
    df = sbspark.to_spark(page, sp)
    assert df.count() == 3 and df.columns == list(core.RECORD_FIELDS)
    with core.receive("q", max_messages=3, connection=emulator.connection_string) as batch:
        locked = sbspark.to_spark(batch, sp)
        assert locked.where("lock_token is not null").count() == 3
        batch.complete()
    back = sbspark.from_spark(df)
    assert back["body_text"].tolist() == ["a", "b", "c"]
    core.send("q", back, connection=emulator.connection_string)  # re-sendable as it is
    assert sorted(str(m) for m in drain(client, "q")) == ["a", "b", "c"]


def test_settle_without_a_known_connection_is_an_error_not_a_new_emulator(
    sp: Any, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sbnotebook.core.connections.connection import embedded
    from sbnotebook.spark import registered

    df = sp.createDataFrame([("q", 1)], "entity string, sequence_number long")
    monkeypatch.setattr(registered, "_default", None)
    monkeypatch.delenv("SERVICEBUS_CONNECTION_STRING", raising=False)
    monkeypatch.delenv("SERVICEBUS_FULLY_QUALIFIED_NAMESPACE", raising=False)
    running = embedded.running
    with pytest.raises(core.ConfigurationError, match="register"):
        sbspark.settle(df, "complete")
    assert embedded.running is running  # no emulator started behind the user's back


def test_write_returns_each_failure_in_the_report(sp: Any, emulator: Emulator, client: ServiceBusClient) -> None:
    emulator.reject_sends("q", 1, "quota-exceeded")
    df = sp.createDataFrame([("a",), ("b",), ("c",)], "body string").coalesce(1)
    report = sbspark.write(df, "q", one_per_send=True, max_in_flight=1)
    assert report.count("sent") == 2 and report.failed == 1 and not report.ok
    (failure,) = report.failures
    assert failure.condition == "amqp:resource-limit-exceeded" and failure.tracking_id and failure.index == 0
    assert sorted(str(m) for m in drain(client, "q")) == ["b", "c"]


def test_register_refuses_a_loopback_emulator_for_a_cluster(emulator: Emulator) -> None:
    class ClusterConf:  # the one thing register() reads before registering: where executors run
        def get(self, key: str, default: str | None = None) -> str | None:
            return "spark://cluster-head:7077" if key == "spark.master" else default

    class ClusterSession:
        conf = ClusterConf()

    with pytest.raises(core.ConfigurationError, match="executors on other hosts"):
        sbspark.register(ClusterSession(), emulator.connection_string)
