"""The record schema (design.md) as Spark and Arrow types, and records -> Arrow batches."""

from __future__ import annotations

from typing import Any

from ..core import RECORD_FIELDS

RECORD_DDL = (
    "message_id string, sequence_number long, enqueued_time timestamp, state string, delivery_count int, "
    "locked_until timestamp, lock_token string, session_id string, partition_key string, correlation_id string, "
    "subject string, content_type string, `to` string, reply_to string, time_to_live double, "
    "scheduled_enqueue_time timestamp, dead_letter_reason string, dead_letter_error_description string, "
    "dead_letter_source string, application_properties map<string,string>, body binary, body_text string, "
    "entity string"
)

# Columns a write accepts, with the Spark type names allowed for each.
WRITE_COLUMNS: dict[str, tuple[str, ...]] = {
    "body": ("string", "binary"),
    "message_id": ("string",),
    "content_type": ("string",),
    "subject": ("string",),
    "correlation_id": ("string",),
    "session_id": ("string",),
    "partition_key": ("string",),
    "to": ("string",),
    "reply_to": ("string",),
    "time_to_live": ("double", "float", "int", "bigint", "decimal"),
    "scheduled_enqueue_time": ("timestamp", "timestamp_ntz"),
    "application_properties": ("map<string,string>",),
}


def record_schema() -> Any:
    """As a StructType, built without a SparkContext (the data source runs in workers that have none)."""
    from pyspark.sql import types as T

    special = {
        "sequence_number": T.LongType(),
        "enqueued_time": T.TimestampType(),
        "delivery_count": T.IntegerType(),
        "locked_until": T.TimestampType(),
        "time_to_live": T.DoubleType(),
        "scheduled_enqueue_time": T.TimestampType(),
        "application_properties": T.MapType(T.StringType(), T.StringType()),
        "body": T.BinaryType(),
    }
    return T.StructType([T.StructField(n, special.get(n, T.StringType())) for n in RECORD_FIELDS])


def arrow_schema() -> Any:
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    types = {
        "sequence_number": pa.int64(),
        "enqueued_time": ts,
        "delivery_count": pa.int32(),
        "locked_until": ts,
        "time_to_live": pa.float64(),
        "scheduled_enqueue_time": ts,
        "application_properties": pa.map_(pa.string(), pa.string()),
        "body": pa.binary(),
    }
    return pa.schema([(name, types.get(name, pa.string())) for name in RECORD_FIELDS])


def to_arrow(records: list[dict[str, Any]], schema: Any) -> Any:
    """Records -> one pyarrow RecordBatch (columnar: cheaper for Spark than row tuples)."""
    import pyarrow as pa

    columns = []
    for field in schema:
        values = [r.get(field.name) for r in records]
        if field.name == "application_properties":
            values = [list(v.items()) if v else [] for v in values]
        columns.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
