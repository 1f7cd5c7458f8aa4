"""Service Bus for Spark: the `servicebus` data source, two-phase settlement, and helpers.

    from sbnotebook import spark as sbspark
    sbspark.register(spark)                       # once per session
    df = spark.read.format("servicebus").option("entity", "orders").load()

See docs/spark.md for the options and guarantees.
"""

from __future__ import annotations

from typing import Any

from ..core import Connection, Report, resolve, to_dataframe
from .options import OptionError
from .schema import RECORD_DDL, record_schema
from .settle import release, settle
from .source import SendFailedError, ServiceBusDataSource, WriteSummary

__all__ = [
    "RECORD_DDL",
    "OptionError",
    "SendFailedError",
    "ServiceBusDataSource",
    "WriteSummary",
    "from_spark",
    "local_session",
    "record_schema",
    "register",
    "release",
    "settle",
    "to_spark",
    "write",
]


DEFAULT_PARTITIONS = 4  # read partitions when neither register() nor numPartitions says


def register(spark: Any, connection: str | Connection | None = None, *, default_partitions: int | None = None) -> Any:
    """Register the `servicebus` format with this session.

    The connection is resolved here, in the notebook (argument, environment, else the embedded
    emulator), and becomes the default for reads and writes without a connection option: Spark runs
    the data source in its own Python workers, which could not find the notebook's emulator."""
    conn = resolve(connection)
    # No sparkContext: Spark Connect (Databricks serverless and shared clusters) has none.
    partitions = default_partitions or DEFAULT_PARTITIONS
    source = _registered(conn, partitions)
    ServiceBusDataSource.default_connection = conn
    spark.dataSource.register(source)
    return spark


def _registered(conn: Connection, partitions: int) -> type[ServiceBusDataSource]:
    """A subclass defined in a function is pickled by value, methods and closure included: the
    resolved connection travels with it to Spark's Python workers, never through options or plans."""

    class RegisteredServiceBus(ServiceBusDataSource):
        def defaults(self) -> tuple[Connection | None, int]:
            return conn, partitions

    return RegisteredServiceBus


def local_session(app_name: str = "sbnotebook", cores: int = 2) -> Any:
    """A local SparkSession for notebooks and tests, with the `servicebus` format registered.
    Sets what a local run needs (spark-notes.md): workers on this Python, loopback networking."""
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(cores * 2))
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.python.worker.faulthandler.enabled", "true")
        .config("spark.sql.execution.pyspark.udf.faulthandler.enabled", "true")
        .config("spark.log.level", "ERROR")
        .getOrCreate()
    )
    return register(spark, default_partitions=cores)


def to_spark(source: Any, spark: Any) -> Any:
    """A peeked page, a locked batch, records or a record-schema pandas DataFrame -> a Spark DataFrame."""
    from ..core import RECORD_FIELDS

    if hasattr(source, "records"):
        records = source.records
    elif hasattr(source, "to_dict") and hasattr(source, "columns"):
        records = source.to_dict("records")
    else:
        records = list(source)
    rows = [tuple(_plain(r.get(f)) for f in RECORD_FIELDS) for r in records]
    return spark.createDataFrame(rows, schema=record_schema())


def _plain(value: Any) -> Any:
    if value is None:
        return None
    if hasattr(value, "to_pydatetime"):
        return value.to_pydatetime()
    if isinstance(value, float) and value != value:
        return None
    return value


def from_spark(df: Any, limit: int | None = 10_000) -> Any:
    """A Spark DataFrame (record schema) -> a pandas DataFrame of records, on the driver. The rows
    can go to `core.send` (they keep their properties) or to the widgets."""
    rows = (df.limit(limit) if limit else df).collect()
    return to_dataframe(r.asDict(recursive=True) for r in rows)


def write(df: Any, entity: str, **options: Any) -> Report:
    """`df.write.format("servicebus")` that returns what the commit counted as a Report (rows sent;
    tasks and operations in ``stats``). Options as for the data source, e.g. maxInFlight=32."""
    import json
    import os
    import tempfile

    fd, report = tempfile.mkstemp(prefix="sbnotebook-write-", suffix=".json")
    os.close(fd)
    try:
        writer = df.write.format("servicebus").mode("append").option("entity", entity).option("reportPath", report)
        for key, value in options.items():
            writer = writer.option(key, str(value))
        writer.save()
        with open(report, encoding="utf-8") as f:
            return WriteSummary(**json.load(f)).to_report()
    finally:
        os.unlink(report)
