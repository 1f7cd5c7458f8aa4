"""The record schema (sbnotebook/core/views/records.py) as Spark and Arrow types, and records -> Arrow batches.

Columns are described by portable kinds (string, long, ...): one table maps a kind to its Spark SQL
type and one to its Arrow type, for the record schema and for the write results (spark/writing.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core import FIELDS

# Portable kinds as Spark SQL types (the record schema's field list lives in core.records).
_SPARK_TYPES = {
    "string": "string",
    "long": "bigint",
    "int": "int",
    "double": "double",
    "bool": "boolean",
    "timestamp": "timestamp",
    "binary": "binary",
    "map": "map<string,string>",
}
Columns = Iterable[tuple[str, str]]  # (name, kind)


def columns_ddl(columns: Columns) -> str:
    """Columns as Spark DDL: "`name` string, `n` bigint"."""
    return ", ".join(f"`{name}` {_SPARK_TYPES[kind]}" for name, kind in columns)


RECORD_DDL = columns_ddl((f.name, f.kind) for f in FIELDS)
"""The record schema (``core.FIELDS``) as Spark DDL: the columns of every read of the data source
(``record_schema()`` is the same as a ``StructType``)."""

# Spark types a write accepts for each kind of sendable field (a string body is sent as text).
_WRITABLE = {
    "string": ("string",),
    "binary": ("string", "binary"),
    "double": ("double", "float", "int", "bigint", "decimal"),
    "timestamp": ("timestamp", "timestamp_ntz"),
    "map": ("map<string,string>",),
}
WRITE_COLUMNS: dict[str, tuple[str, ...]] = {f.name: _WRITABLE[f.kind] for f in FIELDS if f.sendable}


def record_schema() -> Any:
    """As a StructType, built without a SparkContext (the data source runs in workers that have none)."""
    from pyspark.sql import types as T

    types = {
        "string": T.StringType(),
        "long": T.LongType(),
        "int": T.IntegerType(),
        "double": T.DoubleType(),
        "timestamp": T.TimestampType(),
        "binary": T.BinaryType(),
        "map": T.MapType(T.StringType(), T.StringType()),
    }
    return T.StructType([T.StructField(f.name, types[f.kind]) for f in FIELDS])


def arrow_schema_of(columns: Columns) -> Any:
    """Columns as a pyarrow schema (timestamps in UTC, as Spark hands them to a Python source)."""
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "long": pa.int64(),
        "int": pa.int32(),
        "double": pa.float64(),
        "bool": pa.bool_(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "binary": pa.binary(),
        "map": pa.map_(pa.string(), pa.string()),
    }
    return pa.schema([(name, types[kind]) for name, kind in columns])


def arrow_schema() -> Any:
    return arrow_schema_of((f.name, f.kind) for f in FIELDS)


def to_arrow(records: list[dict[str, Any]], schema: Any) -> Any:
    """Records -> one pyarrow RecordBatch (columnar: cheaper for Spark than row tuples). pyarrow
    converts the dicts itself (maps included): half the CPU of building each column in Python."""
    import pyarrow as pa

    return pa.RecordBatch.from_pylist(records, schema=schema)
