"""The `servicebus` PySpark data source: spark.read / df.write / writeStream .format("servicebus")."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)

from ..core import Connection, EntityNotFoundError, SbError, send
from ..core.errors import redact
from . import reading
from .options import OptionError, ReadOptions, WriteOptions, summary
from .schema import arrow_schema, record_schema

log = logging.getLogger("sbnotebook.spark")


class SendFailedError(RuntimeError):
    """A write task could not send some of its messages (after retries)."""


class ServiceBusDataSource(DataSource):
    """Options: see docs/spark.md. `register(spark)` bakes the notebook's resolved connection in as
    the default (so executors reach the same namespace or embedded emulator)."""

    default_connection: ClassVar[Connection | None] = None  # set by register() for settle() on the driver

    def defaults(self) -> tuple[Connection | None, int]:
        """The connection and partition count register() resolved (a registered subclass overrides)."""
        return None, 2

    @classmethod
    def name(cls) -> str:
        return "servicebus"

    def schema(self) -> Any:
        return record_schema()

    def reader(self, schema: Any) -> DataSourceReader:
        conn, partitions = self.defaults()
        return _Reader(ReadOptions.parse(self.options, partitions, conn))

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        return _Writer(WriteOptions.parse(self.options, schema, self.defaults()[0]))

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        return _StreamWriter(WriteOptions.parse(self.options, schema, self.defaults()[0]))


# ------------------------------------------------------------------ reading


class _Reader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:  # must be a list (Spark calls len() and indexes it)
        o = self.options
        if o.mode == "peek":
            try:
                count = reading.message_count(o.connection, o.entity)
                found = reading.bounds(o.connection, o.entity, o.from_sequence_number, count)
            except EntityNotFoundError:
                raise OptionError(f"servicebus: entity not found: {o.entity}") from None
            except SbError as exc:
                raise OptionError(f"servicebus: cannot read {o.entity}: {exc}") from None
            if found is None:
                return []
            ranges = reading.peek_ranges(found[0], found[1], o.num_partitions, o.max_messages)
            log.info("servicebus peek of %s: sequence numbers %d..%d in %d partitions", o.entity, *found, len(ranges))
            return [InputPartition(r) for r in ranges]
        return [InputPartition(s) for s in reading.shares(o.max_messages or 1000, o.num_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        o = self.options
        schema = arrow_schema()
        work = partition.value
        if work is None:  # Spark reads one empty partition when partitions() found nothing
            return
        if o.mode == "peek":
            yield from reading.read_peek(o.connection, o.entity, work, schema)
        elif o.mode == "receive-and-delete":
            yield from reading.read_and_delete(o.connection, o.entity, work, o.wait_seconds, schema)
        else:
            yield from reading.read_and_defer(o.connection, o.entity, work, o.wait_seconds, o.max_in_flight, schema)


# ------------------------------------------------------------------ writing


@dataclass
class SentCounts(WriterCommitMessage):
    sent: int = 0
    total: int = 0
    operations: int = 0
    retries: int = 0
    elapsed: float = 0.0


@dataclass
class WriteSummary:
    """What a write's commit() counted over its tasks (logged on the driver)."""

    entity: str
    tasks: int = 0
    sent: int = 0
    total: int = 0
    operations: int = 0
    retries: int = 0
    batches: list[int] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"{self.sent} of {self.total} rows sent to {self.entity} by {self.tasks} tasks "
            f"({self.operations} send operations, {self.retries} retries)"
        )


def _write_rows(options: WriteOptions, rows: Iterator[Any]) -> SentCounts:
    def records() -> Iterator[dict[str, Any]]:
        for row in rows:
            yield row.asDict(recursive=True)

    report = send(
        options.entity,
        records(),
        max_in_flight=options.max_in_flight,
        batch=options.batch,
        connection=options.connection,
    )
    if not report.ok:
        shown = "; ".join(
            f"row {f.index}: {f.condition or 'error'} (tracking id {f.tracking_id or '-'}): {f.error}"
            for f in report.failures[:5]
        )
        more = f"; and {report.failed - 5} more" if report.failed > 5 else ""
        raise SendFailedError(
            redact(f"servicebus: {report.failed} of {report.total} messages to {options.entity} failed: {shown}{more}")
        )
    return SentCounts(
        report.count("sent"), report.total, report.stats.get("operations", 0), report.retries, report.elapsed
    )


def _commit(options: WriteOptions, messages: list[Any], batch_id: int | None = None) -> WriteSummary:
    done = [m for m in messages if isinstance(m, SentCounts)]
    summary_ = WriteSummary(
        str(options.entity),
        tasks=len(done),
        sent=sum(m.sent for m in done),
        total=sum(m.total for m in done),
        operations=sum(m.operations for m in done),
        retries=sum(m.retries for m in done),
    )
    if batch_id is not None:
        summary_.batches.append(batch_id)
    log.info("servicebus write committed: %s", summary_)
    return summary_


class _Writer(DataSourceWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _write_rows(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _commit(self.options, list(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Spark cannot say what the failed tasks sent before failing (docs/spark.md, "Writing"):
        # writes are at-least-once; a message_id column with duplicate detection makes a rerun safe.
        log.warning("servicebus write to %s aborted: %s", self.options.entity, summary(self.options))


class _StreamWriter(DataSourceStreamWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _write_rows(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _commit(self.options, list(messages), batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("servicebus stream batch %d to %s aborted", batchId, self.options.entity)
