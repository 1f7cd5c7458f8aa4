"""Service Bus for Spark: the `servicebus` data source, two-phase settlement, and helpers.

    from sbnotebook import spark as sbspark
    sbspark.register(spark)                       # once per session
    df = spark.read.format("servicebus").option("entity", "orders").load()

See docs/spark.md for the options and guarantees.

Where to change what:

- the data source: ``source.py`` (the ``servicebus`` format: read, write, readStream), ``spec.py``
  (what a read, a stream or a write was given, parsed once), ``options.py`` (the option names and
  one parser per kind of value), ``reading.py`` (what each read partition does, on the executors),
  ``streaming.py`` (the micro-batch source that settles after commit), ``writing.py`` (each task
  sends its rows through ``core.send``), ``pushdown.py`` (Spark's filters as a read's bounds);
- the columns: ``schema.py`` (the record schema as Spark and Arrow types), ``bodies.py``,
  ``body_schema.py`` and ``body_stream.py`` (``bodyFormat=json``: the body's columns, its inferred
  schema, the schema a stream's checkpoint records);
- the second phase of ``mode=defer``: ``settle.py`` (``settle``, ``requeue``), ``deferred.py``
  (deferred messages by sequence number);
- the connection: ``registered.py`` (the one ``register()`` resolved in this process),
  ``secrets.py`` (secret references, resolved where they are used);
- routing: ``routing.py`` (``route``: where each row would go through a topic's rules, on the executors);
- here: ``register``, ``local_session``, ``infer_body_schema``, ``to_spark``, ``from_spark``, ``write``.
"""

from __future__ import annotations

import operator
from typing import Any

from ..core import (
    MAX_IN_FLIGHT,
    ConfigurationError,
    Connection,
    Rate,
    Report,
    parse_rate,
    renamed,
    resolve,
    to_dataframe,
)
from . import registered
from .options import OptionError
from .routing import route_frame as route
from .schema import RECORD_DDL, record_schema
from .secrets import Source, source_of
from .settle import release as release  # the old name of requeue, kept for one release (not in __all__)
from .settle import requeue, settle
from .source import ServiceBusDataSource
from .writing import SendFailedError

__all__ = [
    "RECORD_DDL",
    "OptionError",
    "SendFailedError",
    "ServiceBusDataSource",
    "from_spark",
    "infer_body_schema",
    "local_session",
    "record_schema",
    "register",
    "requeue",
    "route",
    "settle",
    "to_spark",
    "write",
]


DEFAULT_PARTITIONS = 4  # read partitions when neither register() nor numPartitions says
RATE_TASKS = 2  # the tasks write(rate=) splits its rate among when tasks= does not say


@renamed(namespace="fully_qualified_namespace", default_partitions="default_num_partitions")
def register(
    spark: Any,
    connection: str | Connection | None = None,
    *,
    fully_qualified_namespace: str | None = None,
    credential: str | None = None,
    websockets: bool = False,
    default_num_partitions: int | None = None,
) -> Any:
    """Register the `servicebus` format with this session.

    `connection` becomes the default for reads and writes without a connection option. A secret
    reference (``"env:NAME"``, ``"secret:scope/key"``) stays a reference: each Spark process
    resolves it where it needs the connection, so the key never passes through the notebook.
    ``fully_qualified_namespace=`` with ``credential=``, a credential reference (``"service-credential:NAME"``, a Unity
    Catalog service credential; ``"callable:package.module:function"``), signs in with Entra ID:
    each Spark process makes that credential itself, and there is no key at all (serverless).
    Anything else is resolved here, in the notebook (argument, ``fully_qualified_namespace=`` alone with
    DefaultAzureCredential, environment, else the embedded emulator): Spark runs the data source in
    its own Python workers, which could not find the notebook's emulator. ``websockets=True``: every
    process dials AMQP over WebSockets (port 443) where port 5671 is blocked.
    ``default_num_partitions``: the ``numPartitions`` of a read that does not give it."""
    if default_num_partitions is not None and default_num_partitions < 1:
        raise OptionError(f"servicebus: default_num_partitions must be 1 or more, not {default_num_partitions}.")
    conn = source_of(connection, namespace=fully_qualified_namespace, credential=credential, websockets=websockets)
    if conn is None:
        conn = resolve(websockets=websockets)
    if isinstance(conn, Connection):
        _check_reachable(spark, conn)
    # No sparkContext: Spark Connect (Databricks serverless and shared clusters) has none.
    partitions = DEFAULT_PARTITIONS if default_num_partitions is None else default_num_partitions
    source = _registered(conn, partitions)
    registered.set_default(conn)
    spark.dataSource.register(source)
    return spark


def _check_reachable(spark: Any, conn: Connection) -> None:
    """An emulator on this machine's loopback is unreachable from executors on other hosts: say so
    now, instead of letting every task fail to connect."""
    host = conn.fully_qualified_namespace.rsplit(":", 1)[0]
    if not conn.is_emulator or host not in ("127.0.0.1", "localhost", "::1"):
        return
    master = str(spark.conf.get("spark.master", "local") or "local")
    if not master.startswith("local"):
        raise ConfigurationError(
            f"The emulator at {conn.fully_qualified_namespace} listens on this machine's loopback, which executors on "
            f"other hosts ({master}) cannot reach: run `sbnotebook emulator --host 0.0.0.0` on a host "
            "they can reach and pass its connection string (with that host name) to register()."
        )


def _registered(conn: Source, partitions: int) -> type[ServiceBusDataSource]:
    """A subclass defined in a function is pickled by value, methods and closure included: the
    resolved connection travels with it to Spark's Python workers, never through options or plans."""

    class RegisteredServiceBus(ServiceBusDataSource):
        def defaults(self) -> tuple[Source | None, int]:
            return conn, partitions

    return RegisteredServiceBus


def local_session(app_name: str = "sbnotebook", cores: int = 2) -> Any:
    """A local SparkSession for notebooks and tests, with the `servicebus` format registered.
    Sets what a local run needs (docs/spark.md): workers on this Python, loopback networking."""
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
    return register(spark, default_num_partitions=cores)


@renamed(sample="body_sample_size", start="from_sequence_number")
def infer_body_schema(
    entity: str,
    body_sample_size: int | None = None,
    *,
    connection: str | Connection | None = None,
    from_sequence_number: int = 1,
) -> str:
    """The body schema a ``bodyFormat=json`` read would infer for `entity`, as the DDL the bodySchema
    option takes: pin it so that a later read (or a stream's restart) keeps these columns. Peeks at
    most `body_sample_size` bodies (the read's bodySampleSize) from `from_sequence_number` on
    (nothing locked); runs here, needs no Spark session."""
    from .body_schema import ddl, inferred_struct
    from .options import entity as entity_path
    from .spec import DEFAULT_SAMPLE, MAX_SAMPLE

    size = DEFAULT_SAMPLE if body_sample_size is None else body_sample_size
    if not 1 <= size <= MAX_SAMPLE:
        raise OptionError(f"servicebus: body_sample_size must be 1 to {MAX_SAMPLE}, not {size}.")
    conn = resolve(connection) if connection is not None or registered.default() is None else None
    if conn is None:
        from .secrets import connection_of

        conn = connection_of(registered.default())  # type: ignore[arg-type]
    return ddl(inferred_struct(conn, entity_path({"entity": entity}), from_sequence_number, size))


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


@renamed(limit="max_messages")
def from_spark(df: Any, max_messages: int | None = 10_000) -> Any:
    """A Spark DataFrame (record schema) -> a pandas DataFrame of records, on the driver: at most
    `max_messages` rows (None: every row). The rows can go to `core.send` (they keep their
    properties) or to the widgets."""
    rows = (df.limit(max_messages) if max_messages else df).collect()
    return to_dataframe(r.asDict(recursive=True) for r in rows)


@renamed(namespace="fully_qualified_namespace", batch=("one_per_send", operator.not_))  # as core.send
def write(
    df: Any,
    entity: str,
    *,
    connection: str | Connection | None = None,
    fully_qualified_namespace: str | None = None,
    credential: str | None = None,
    websockets: bool = False,
    max_in_flight: int = MAX_IN_FLIGHT,
    one_per_send: bool = False,
    rate: Rate | None = None,
    tasks: int | None = None,
    rate_per_partition: Rate | None = None,
) -> Report:
    """Send a DataFrame's rows (the columns a `servicebus` write takes) and return the one Report:
    every row's outcome is counted, every failure listed with its condition and tracking id. The
    outcomes come back through Spark as a small result DataFrame, so this works on classic clusters
    and on Spark Connect alike (no files, no driver-local state).

    ``rate`` (``200/s``, ``12000/m``: core's one grammar): the whole write sends at most that many
    messages per second. Tasks cannot see one another, so the DataFrame is repartitioned to ``tasks``
    partitions (``RATE_TASKS`` unless told) and each task sends at most ``rate / tasks`` a second: the
    tasks together reach ``rate`` only when they run at once (a cluster with ``tasks`` free cores);
    where some wait for a core the write is slower, never faster. ``rate_per_partition`` (the option
    ``ratePerPartition``) holds each task of the DataFrame's own partitions instead: the write's rate
    is that times the tasks running at once. One of the two, not both; ``tasks`` only with ``rate``."""
    import time

    from pyspark.sql.types import StructType

    from . import writing
    from .spec import WriteOptions

    if not isinstance(df.schema, StructType):
        raise TypeError("write() takes a DataFrame")
    df, per_task = _at_rate(df, rate, tasks, rate_per_partition)  # refused here, before any job
    given = source_of(
        connection, namespace=fully_qualified_namespace, credential=credential
    )  # as register() takes them
    opts = WriteOptions.parse(
        {
            "entity": entity,
            "maxInFlight": str(max_in_flight),
            "onePerSend": str(one_per_send).lower(),
            "websockets": str(websockets).lower(),
            **({} if per_task is None else {"ratePerPartition": f"{per_task:.12f}/s"}),
        },
        df.schema,
        given or registered.default(),
    )
    started = time.perf_counter()
    report = writing.fold(df.mapInArrow(writing.arrow_task(opts), writing.RESULT_DDL).collect(), str(opts.entity))
    report.elapsed = time.perf_counter() - started  # the wall time, not the longest task's
    return report


def _at_rate(
    df: Any, rate: Rate | None, tasks: int | None, rate_per_partition: Rate | None
) -> tuple[Any, float | None]:
    """The DataFrame to write and each task's rate (None: as fast as max_in_flight allows): with a
    whole write's ``rate``, the DataFrame in ``tasks`` partitions, each task at its share."""
    per_task = parse_rate(rate_per_partition, name="rate_per_partition")
    whole = parse_rate(rate, name="rate")
    if whole is not None and per_task is not None:
        raise OptionError("servicebus: give rate (the whole write's) or rate_per_partition (each task's), not both.")
    if tasks is not None and whole is None:
        raise OptionError("servicebus: tasks splits a rate among the write's tasks: give rate with it.")
    if whole is None:
        return df, per_task
    count = RATE_TASKS if tasks is None else tasks
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise OptionError(f"servicebus: tasks must be a whole number of 1 or more, not {count!r}.")
    return df.repartition(count), whole / count
