"""Message bodies as columns (bodyFormat / bodySchema / _rescued_body, spark/bodies.py, body_schema.py) on a local[2]
session, the real SDK and the embedded emulator: inference agrees with Spark's own JSON reader, a
given schema, rescued bodies, the write side, infer_body_schema vs %sb_peek --json, and a stream's
body schema recorded in its checkpoint."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook.emulator import Emulator
from tests.helpers import drain, send
from tests.required import require_module
from tests.spark.helpers import read

pyspark = require_module("pyspark")
from pyspark.errors import StreamingQueryException  # noqa: E402

from sbnotebook import spark as sbspark  # noqa: E402
from sbnotebook.spark import bodies, body_schema  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

# Spark's inference rules, one case each: widening (bigint+double), conflict (bigint+string -> string),
# nulls and empty arrays (string), nested objects merged, arrays of objects, a big integer (decimal),
# an empty object dropped, fields sorted by name.
WIDENING = [
    '{"id": 1, "price": 2, "tag": 5, "n": null, "deep": {"b": 1}, "items": [], "big": 1}',
    '{"id": 2, "price": 2.5, "tag": "x", "n": null, "deep": {"a": "s", "b": 2}, "items": [{"q": 1}]}',
    '{"id": 3, "ok": true, "deep": {"c": [1, 2.5]}, "items": [{"r": "z"}], "empty": {}, '
    '"huge": 123456789012345678901234567890, "zs": [null]}',
]


def spark_json_schema(sp: Any, texts: list[str], tmp_path: Path) -> Any:
    """What spark.read.json infers for these documents (one per line)."""
    path = tmp_path / "sample.json"
    path.write_text("\n".join(texts) + "\n")
    return sp.read.json(str(path)).schema


def test_inference_is_what_spark_read_json_infers(sp: Any, tmp_path: Path) -> None:
    expected = spark_json_schema(sp, WIDENING, tmp_path)
    assert body_schema.infer(t.encode() for t in WIDENING) == expected
    assert {f.name for f in expected.fields} >= {"big", "deep", "huge", "items", "n", "zs"}  # the cases are there
    # and the DDL it prints is one Spark parses back to the same type
    assert sp.createDataFrame([], body_schema.ddl(expected)).schema == expected


def test_a_json_read_infers_groups_and_rescues_what_is_not_json(sp: Any, client: ServiceBusClient) -> None:
    good = [json.dumps({"kind": k, "amount": i, "meta": {"src": "web"}}) for i, k in enumerate("aabab")]
    send(client, "q", *good, "not json {", '["an", "array"]', "")
    df = read(sp, "q", bodyFormat="json")
    assert df.schema["body_json"].dataType == spark_type("amount bigint, kind string, meta struct<src: string>")
    rows = df.select("body_json", "_rescued_body", "body_text").collect()
    assert len(rows) == 8  # nothing dropped
    rescued = sorted(r._rescued_body for r in rows if r._rescued_body is not None)
    assert rescued == ["", '["an", "array"]', "not json {"]
    assert all(r.body_json is None for r in rows if r._rescued_body is not None)
    counts = {r.kind: r.n for r in df.groupBy("body_json.kind").count().withColumnRenamed("count", "n").collect()}
    assert counts == {"a": 3, "b": 2, None: 3}
    assert len(drain(client, "q")) == 8  # peeking took nothing


def test_a_given_schema_keeps_what_fits_and_rescues_the_rest(sp: Any, client: ServiceBusClient) -> None:
    send(
        client,
        "q",
        '{"id": 1, "kind": "a"}',
        '{"id": "two", "kind": "b"}',  # a value of another type
        '{"id": 3, "kind": "c", "extra": true}',  # a field the schema lacks
        '{"id": 4}',  # a missing field is a null, not a misfit
    )
    df = read(sp, "q", bodyFormat="json", bodySchema="id bigint, kind string", numPartitions=1)
    rows = sorted(df.select("sequence_number", "body_json", "_rescued_body").collect())
    assert [r.body_json and r.body_json.asDict() for r in rows] == [
        {"id": 1, "kind": "a"},
        {"id": None, "kind": "b"},
        {"id": 3, "kind": "c"},
        {"id": 4, "kind": None},
    ]
    assert [r._rescued_body for r in rows] == [
        None,
        '{"id": "two", "kind": "b"}',
        '{"id": 3, "kind": "c", "extra": true}',
        None,
    ]


def test_all_fitting_bodies_take_the_arrow_path_and_a_misfit_the_python_one() -> None:
    """The fast path (pyarrow's JSON reader) and the body-by-body one give the same rows."""
    import pyarrow as pa

    struct = spark_type("id bigint, kind string, tags array<string>, at timestamp")
    columns = bodies.BodyColumns("json", struct)
    good = [b'{"id": 1, "kind": "a", "tags": ["x"], "at": "2026-01-02T03:04:05Z"}', b'{"id": 2}']
    assert columns._fast(good) is not None
    assert columns._fast([*good, b"{}\n{}"]) is None  # two lines in one body
    fast = columns._fast(good).to_pylist()
    slow, rescued, bad = columns._slow(good)
    assert slow.to_pylist() == fast and bad == 0 and rescued.null_count == 2
    batch = pa.RecordBatch.from_pylist([{"body": b} for b in [*good, b"oops"]])
    out, bad = columns.add(batch)
    assert bad == 1 and out.column("_rescued_body").to_pylist() == [None, None, "oops"]


def test_text_format_decodes_every_utf8_body(sp: Any, client: ServiceBusClient) -> None:
    send(client, "q", "plain", content_type="application/octet-stream")  # body_text is None by default
    assert read(sp, "q").collect()[0].body_text is None
    assert read(sp, "q", bodyFormat="text").collect()[0].body_text == "plain"
    drain(client, "q")


def test_bad_body_options_are_one_line_errors(sp: Any, client: ServiceBusClient) -> None:
    for options, wanted in [
        ({"bodyFormat": "xml"}, "bodyFormat must be one of binary, text, json"),
        ({"bodySchema": "a int"}, "bodySchema needs bodyFormat=json"),
        ({"bodyFormat": "json", "bodySampleSize": "0"}, "bodySampleSize must be 1 to"),
        ({"bodyFormat": "json"}, "cannot infer a body schema"),  # the queue is empty
    ]:
        with pytest.raises(Exception) as caught:
            read(sp, "q", **options).collect()
        assert wanted in str(caught.value)


def test_write_sends_a_struct_as_json_and_a_rescued_body_as_it_was(sp: Any, client: ServiceBusClient) -> None:
    send(client, "q", '{"id": 1, "tags": ["x"]}', '{"id": 2, "tags": []}', "broken {")
    df = read(sp, "q", bodyFormat="json", bodySchema="id bigint, tags array<string>")
    from pyspark.sql import functions as F

    changed = F.struct((F.col("body_json.id") + 10).alias("id"), "body_json.tags")
    bumped = df.withColumn("body_json", F.when(F.col("body_json").isNotNull(), changed))
    bumped.select("body", "body_json", "_rescued_body", "message_id").write.format("servicebus").option(
        "entity", "once"
    ).mode("append").save()
    got = drain(client, "once")
    by_body = {str(m): m.content_type for m in got}
    assert by_body == {
        '{"id":11,"tags":["x"]}': "application/json",
        '{"id":12,"tags":[]}': "application/json",
        "broken {": None,
    }

    struct_body = sp.createDataFrame([({"a": 1, "b": None},)], "body struct<a: int, b: string>")
    assert sbspark.write(struct_body, "once").ok
    [message] = drain(client, "once")
    assert (str(message), message.content_type) == ('{"a":1}', "application/json")  # nulls left out, as to_json
    drain(client, "q")


def test_infer_body_schema_and_sb_peek_json_agree(sp: Any, client: ServiceBusClient, emulator: Emulator) -> None:
    texts = [
        json.dumps({"order": {"id": i, "lines": 2}, "price": 1.5 * i, "ok": i % 2 == 0, "who": "c"}) for i in range(5)
    ]
    send(client, "q", *texts)
    ddl = sbspark.infer_body_schema("q", body_sample_size=50)
    assert ddl == "`ok` boolean, `order` struct<`id`: bigint, `lines`: bigint>, `price` double, `who` string"
    assert read(sp, "q", bodyFormat="json").schema["body_json"].dataType == spark_type(ddl)

    frame = core.json_columns(core.to_dataframe(core.peek("q", max_messages=50, connection=emulator.connection_string)))
    pandas_kinds = {c[len("body_json.") :]: str(frame[c].dtype) for c in frame.columns if c.startswith("body_json.")}
    spark_kinds = dict(flatten(spark_type(ddl)))
    assert pandas_kinds.keys() == spark_kinds.keys()
    as_pandas = {"bigint": "int64", "double": "float64", "boolean": "bool", "string": "object"}
    assert {k: as_pandas[v] for k, v in spark_kinds.items()} == pandas_kinds
    drain(client, "q")


def test_a_stream_records_its_body_schema_and_a_restart_keeps_it(
    sp: Any, client: ServiceBusClient, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "cp"
    seen: list[Any] = []

    def sink(batch: Any, _: int) -> None:
        seen.extend(batch.select("body_json", "_rescued_body").collect())

    send(client, "q", '{"id": 1}', '{"id": 2}')
    first = run(stream(sp, "q", bodyFormat="json"), checkpoint, sink)
    assert first.exception() is None and sorted(r.body_json.id for r in seen) == [1, 2]
    offsets = sorted((p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    assert (
        json.loads(offsets[-1].read_text().splitlines()[-1])["bodySchema"] == "`id` bigint"
    )  # recorded in the checkpoint

    send(client, "q", '{"id": 3, "new": "field"}')  # inferred again now, the schema would differ
    second = run(stream(sp, "q", bodyFormat="json"), checkpoint, sink)
    text = str(second.exception())
    assert "body schema of this stream of q changed" in text and ".option('bodySchema', '`id` bigint')" in text
    assert len(seen) == 2

    third = run(stream(sp, "q", bodyFormat="json", bodySchema="`id` bigint"), checkpoint, sink)
    assert third.exception() is None
    assert [(r.body_json.id, r._rescued_body) for r in seen[2:]] == [(3, '{"id": 3, "new": "field"}')]
    assert not drain(client, "q", wait=0.5)  # every batch completed


# ------------------------------------------------------------------ helpers


def spark_type(ddl: str) -> Any:
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(f"struct<{ddl}>")


def flatten(struct: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    from pyspark.sql.types import StructType

    for f in struct.fields:
        if isinstance(f.dataType, StructType):
            yield from flatten(f.dataType, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", f.dataType.simpleString()


def stream(sp: Any, entity: str, **options: Any) -> Any:
    reader = sp.readStream.format("servicebus").option("entity", entity)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def run(df: Any, checkpoint: Path, sink: Any, timeout: float = 120) -> Any:
    query = (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(timeout)
    except StreamingQueryException:
        pass
    finally:
        if query.isActive:
            query.stop()
    return query
