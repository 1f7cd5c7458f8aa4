"""JSON bodies as columns, end to end: the same scenarios run on local-cluster (tests/spark/test_cluster.py)
and over Spark Connect (tests/spark/test_connect.py). Only DataFrame APIs: nothing here touches
sparkContext or reads what another process wrote, apart from the Parquet sink the session wrote."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusClient

from tests.helpers import drain, send
from tests.spark.helpers import read


def batch_read_infer_pin_rescue_and_write(spark: Any, client: ServiceBusClient) -> None:
    """Inference, a given schema, rescued bodies and the write side, on the session's executors."""
    from pyspark.sql import functions as F

    drain(client, "q", wait=0.2)  # the module's emulator: start from an empty queue
    good = [json.dumps({"kind": "ab"[i % 2], "n": i, "meta": {"ok": i % 3 == 0}}) for i in range(40)]
    send(client, "q", *good, "not json", '{"kind": "a", "n": "NaN?"}')
    df = read(spark, "q", bodyFormat="json", numPartitions=2)
    assert df.schema["body_json"].dataType.simpleString() == "struct<kind:string,meta:struct<ok:boolean>,n:string>"
    pinned = read(spark, "q", bodyFormat="json", bodySchema="kind string, n bigint", numPartitions=2)
    rows = pinned.select("body_json", "_rescued_body").collect()
    assert len(rows) == 42
    rescued = sorted(r._rescued_body for r in rows if r._rescued_body is not None)
    # a field the schema lacks (meta) is a misfit too: every good body is rescued, with its fields kept
    assert len(rescued) == 42 and "not json" in rescued
    pinned = read(spark, "q", bodyFormat="json", bodySchema="kind string, n bigint, meta struct<ok: boolean>")
    rows = pinned.select("body_json", "_rescued_body").collect()
    assert sorted(r._rescued_body for r in rows if r._rescued_body is not None) == [
        "not json",
        '{"kind": "a", "n": "NaN?"}',
    ]
    counts = {r["kind"]: r["count"] for r in pinned.groupBy("body_json.kind").count().collect()}
    assert counts == {"a": 21, "b": 20, None: 1}

    out = pinned.where("_rescued_body is null").select(
        F.struct(F.col("body_json.kind").alias("k"), (F.col("body_json.n") * 2).alias("twice")).alias("body_json")
    )
    out.write.format("servicebus").option("entity", "once").mode("append").save()
    got = drain(client, "once")
    assert {m.content_type for m in got} == {"application/json"}
    assert sorted(json.loads(str(m))["twice"] for m in got) == [2 * i for i in range(40)]
    assert len(drain(client, "q", wait=0.5)) == 42  # the reads peeked: nothing taken


def stream_restart_keeps_the_recorded_schema(spark: Any, client: ServiceBusClient, tmp_path: Path) -> None:
    """A stream records its inferred body schema in the checkpoint; a restart that infers another one
    fails with the recorded one to pin; pinned, it goes on and rescues the new field."""
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"

    def run(**options: Any) -> str | None:
        reader = spark.readStream.format("servicebus").option("entity", "q").option("bodyFormat", "json")
        for key, value in options.items():
            reader = reader.option(key, value)
        query = (
            reader.load()
            .select("sequence_number", "body_json", "_rescued_body")
            .writeStream.format("parquet")
            .option("path", str(sink))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        with contextlib.suppress(Exception):  # the query's own exception is returned below
            query.awaitTermination(120)
        if query.isActive:
            query.stop()
        error = query.exception()
        return None if error is None else str(error)

    drain(client, "q", wait=0.2)
    send(client, "q", '{"id": 1}', '{"id": 2}')
    assert run() is None
    send(client, "q", '{"id": 3, "extra": "x"}')
    error = run()
    assert error is not None and ".option('bodySchema', '`id` bigint')" in error, error
    assert run(bodySchema="`id` bigint") is None
    rows = sorted(spark.read.parquet(str(sink)).collect())
    assert [(r.body_json.id, r._rescued_body) for r in rows] == [(1, None), (2, None), (3, '{"id": 3, "extra": "x"}')]
    assert not drain(client, "q", wait=0.5)  # every batch completed
