"""The Spark data source's read, write and stream as spans, and its ``trace`` option (issue 60),
run in this process as a Spark Python worker runs them (no JVM: a worker's spans go to that
worker's tracer provider, which a test cannot read across processes)."""

from __future__ import annotations

from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.emulator import Emulator
from sbnotebook.testing.spans import Spans
from tests.required import require_module

require_module("pyspark")
require_module("opentelemetry.sdk.trace")

from pyspark.sql.types import StringType, StructField, StructType  # noqa: E402

from sbnotebook.spark import bodies, writing  # noqa: E402
from sbnotebook.spark.options import OptionError  # noqa: E402
from sbnotebook.spark.schema import record_schema  # noqa: E402
from sbnotebook.spark.source import _Reader  # noqa: E402
from sbnotebook.spark.spec import ReadSpec, WriteOptions  # noqa: E402


def _read_all(options: Any) -> int:
    """Every partition of a batch read, as the executors read them: the rows."""
    spec_body = ReadSpec({"entity": str(options.entity)}, 1, options.connection).body
    reader = _Reader(options, bodies.body_columns(spec_body, record_schema()))
    return sum(int(batch.num_rows) for part in reader.partitions() for batch in reader.read(part))


def test_write_and_read_are_spans_and_trace_true_adds_the_sdks(emulator: Emulator, servicebus_spans: Spans) -> None:
    given = {"entity": "q", "connectionString": emulator.connection_string}
    schema = StructType([StructField("body", StringType())])
    plain = WriteOptions.parse(given, schema)
    assert plain.trace is False
    writing.send_rows(plain, [{"body": "a"}, {"body": "b"}]).raise_for_failures()
    (write,) = servicebus_spans.find("sbnotebook.write")
    assert write.attributes["messaging.destination.name"] == "q"
    assert (write.attributes["messaging.batch.message_count"], write.attributes["sbnotebook.outcome"]) == (2, "ok")
    (send,) = servicebus_spans.find("sbnotebook.send")
    assert send.parent is not None and send.parent.span_id == write.context.span_id
    assert not servicebus_spans.find("ServiceBus.send")  # the SDK's tracing is off without the option

    servicebus_spans.clear()
    traced = WriteOptions.parse({**given, "trace": "true"}, schema)
    assert traced.trace is True
    writing.send_rows(traced, [{"body": "c"}]).raise_for_failures()
    (write,) = servicebus_spans.find("sbnotebook.write")
    sdk = servicebus_spans.find("ServiceBus.send")
    assert sdk and all(s.context.trace_id == write.context.trace_id for s in sdk)

    servicebus_spans.clear()
    read = ReadSpec({**given, "trace": "true", "numPartitions": "1"}, 1, None).read()
    assert read.trace is True
    assert _read_all(read) == 3
    (span,) = servicebus_spans.find("sbnotebook.read")
    assert (span.attributes["messaging.batch.message_count"], span.attributes["sbnotebook.outcome"]) == (3, "ok")
    assert span.attributes["messaging.operation.type"] == "receive"
    core.close_all()


def test_the_trace_option_is_true_or_false(emulator: Emulator) -> None:
    given = {"entity": "q", "connectionString": emulator.connection_string}
    with pytest.raises(OptionError, match="option trace must be true or false"):
        ReadSpec({**given, "trace": "yes"}, 1, None).read()
    assert ReadSpec({**given, "trace": "TRUE"}, 1, None).stream().trace is True


def test_a_streams_partition_is_a_span(emulator: Emulator, servicebus_spans: Spans) -> None:
    """One micro-batch, its offsets planned, its partitions read and committed as Spark drives a
    stream source (pyspark 4.0's calls: no admission control)."""
    from sbnotebook.spark.streaming import ServiceBusStreamReader

    conn_str = emulator.connection_string
    core.send("q", ["x", "y"], connection=conn_str).raise_for_failures()
    reader = ServiceBusStreamReader(
        ReadSpec({"entity": "q", "connectionString": conn_str, "numPartitions": "1"}, 1, None).stream()
    )
    start = reader.initialOffset()
    end = reader.latestOffset()
    rows = sum(int(batch.num_rows) for part in reader.partitions(start, end) for batch in reader.read(part))
    reader.commit(end)
    reader.stop()
    assert rows == 2
    (span,) = servicebus_spans.find("sbnotebook.stream")
    assert (span.attributes["messaging.batch.message_count"], span.attributes["sbnotebook.outcome"]) == (2, "ok")
    assert span.attributes["messaging.destination.name"] == "q"
    core.close_all()
