"""The `servicebus` PySpark data source: spark.read / df.write / writeStream .format("servicebus")."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from functools import cached_property
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)

from ..core import Connection, EntityNotFoundError, EntityPath, SbError, list_sessions
from . import bodies, body_stream, reading, writing
from .options import OptionError, check_known, summary
from .schema import arrow_schema
from .secrets import Source
from .spec import DESTRUCTIVE_BOUND, ReadOptions, ReadSpec, WriteOptions
from .streaming import ServiceBusStreamReader

log = logging.getLogger("sbnotebook.spark")

MAX_SESSIONS = 100_000  # listed per read; Service Bus pages the listing, so this only bounds memory


def _session_ids(entity: EntityPath, conn: Connection) -> list[str]:
    """Every session of the entity with messages or state: ids only (no session is accepted)."""
    return [s.session_id for s in list_sessions(entity, details=False, max_sessions=MAX_SESSIONS, connection=conn)]


class ServiceBusDataSource(DataSource):
    """Options: see docs/spark.md. `register(spark)` bakes the notebook's resolved connection in as
    the default (so executors reach the same namespace or embedded emulator)."""

    def defaults(self) -> tuple[Source | None, int]:
        """The connection and partition count register() resolved (a registered subclass overrides)."""
        return None, 2

    @classmethod
    def name(cls) -> str:
        return "servicebus"

    @cached_property
    def spec(self) -> ReadSpec:
        """A read's or a stream's options, parsed once (spark/spec.py), for schema(), reader() and streamReader()."""
        connection, partitions = self.defaults()
        return ReadSpec(self.options, partitions, connection)

    def schema(self) -> Any:
        # Before a read's schema is inferred: a misspelt option fails here, first (batch or stream:
        # which one is not known yet, so an option of either passes until reader()/streamReader()).
        check_known(self.options, "read", "stream")
        return bodies.read_schema(self.spec)  # bodyFormat=json adds columns

    def reader(self, schema: Any) -> DataSourceReader:
        options = self.spec.read()
        body = bodies.body_columns(self.spec.body, schema)
        if options.push_filters:  # only then: Spark fails every read of a reader with pushFilters while its conf is off
            return ServiceBusPushdownReader(options, body)
        return _Reader(options, body)

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        return _Writer(WriteOptions.parse(self.options, schema, self.defaults()[0]))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        # docs/spark.md, "Structured Streaming"
        reader = ServiceBusStreamReader(self.spec.stream())
        return body_stream.attach(reader, bodies.body_columns(self.spec.body, schema))

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        return _StreamWriter(WriteOptions.parse(self.options, schema, self.defaults()[0], kind="stream write"))


# ------------------------------------------------------------------ reading


class _Reader(DataSourceReader):
    def __init__(self, options: ReadOptions, body: bodies.BodyColumns) -> None:
        self.options = options
        self.body = body

    def partitions(self) -> list[InputPartition]:  # must be a list (Spark calls len() and indexes it)
        o = self.options
        try:
            conn = o.conn()
            if o.session_enabled:
                return self._session_partitions(conn)
            if o.mode == "peek":
                ranges = reading.plan_peek(
                    conn,
                    o.entity,
                    o.from_sequence_number,
                    o.num_partitions,
                    o.max_messages,
                    o.window,
                    o.to_sequence_number,
                )
                log.info("servicebus peek of %s in %d partitions", o.entity, len(ranges))
                return [InputPartition(r) for r in ranges]
        except EntityNotFoundError:
            raise OptionError(f"servicebus: entity not found: {o.entity}") from None
        except SbError as exc:
            text = str(exc)
            raise OptionError(
                text if text.startswith("servicebus:") else f"servicebus: cannot read {o.entity}: {text}"
            ) from None
        return [InputPartition(s) for s in reading.shares(o.max_messages or DESTRUCTIVE_BOUND, o.num_partitions)]

    def _session_partitions(self, conn: Connection) -> list[InputPartition]:
        """Sessions as they are now (the sessionIds option, else every session with messages or state),
        dealt to the partitions; each partition holds one session's lock at a time."""
        o = self.options
        sessions = list(o.sessions) if o.sessions else _session_ids(o.entity, conn)
        groups = reading.session_groups(sessions, o.num_partitions, o.max_messages)
        log.info("servicebus %s of %s: %d sessions in %d partitions", o.mode, o.entity, len(sessions), len(groups))
        return [InputPartition(g) for g in groups]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        # Spark reads one empty partition when partitions() found nothing: pyspark 4.1+ passes
        # InputPartition(None), 4.0 passes None itself.
        work = partition.value if partition is not None else None
        if work is None:
            return
        what = f"read of {self.options.entity} partition {getattr(work, 'index', 0)}"
        yield from self.body.apply(reading.traced("read", self.options, self._records(work)), what)

    def _records(self, work: Any) -> Iterator[Any]:
        o = self.options
        schema = arrow_schema()
        conn = o.conn()  # a secret reference is resolved here, on the executor
        if isinstance(work, reading.SessionGroup):
            if o.mode == "peek":
                yield from reading.read_session_peek(conn, o.entity, work, o.from_sequence_number, schema, o.window)
            else:
                yield from reading.read_sessions_and_delete(conn, o.entity, work, o.wait_seconds, schema)
        elif o.mode == "peek":
            yield from reading.read_peek(conn, o.entity, work, schema, o.max_in_flight)
        elif o.mode == "receive_and_delete":
            yield from reading.read_and_delete(conn, o.entity, work, o.wait_seconds, schema)
        else:
            yield from reading.read_and_defer(conn, o.entity, work, o.wait_seconds, o.max_in_flight, schema)


class ServiceBusPushdownReader(_Reader):
    """A peek read that takes Spark's filters (the pushFilters option, pyspark 4.1+, checked by
    spec.read(); spark/pushdown.py). Its name is in Spark's DATA_SOURCE_PUSHDOWN_DISABLED error when
    the conf is off."""

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        # Called once at planning, before partitions() and in the same process: the bounds the
        # filters give are planned with there (a few peeks), and the reader is pickled with them.
        from .pushdown import push  # imports filter classes pyspark 4.0 does not have

        self.options, rest = push(filters, self.options)
        return rest


# ------------------------------------------------------------------ writing (one Report: spark/writing.py)


class _Writer(DataSourceWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return writing.format_task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """The write's one Report, logged (commit runs in a Python worker beside the driver)."""
        log.info("servicebus write committed: %s", writing.commit_report(messages, str(self.options.entity)))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Spark cannot say what the failed tasks sent before failing (docs/spark.md, "Writing"):
        # writes are at-least-once; a message_id column with duplicate detection makes a rerun safe.
        done = writing.commit_report(messages, str(self.options.entity))
        log.warning(
            "servicebus write to %s aborted; tasks that finished: %s; %s",
            self.options.entity,
            done,
            summary(self.options),
        )


class _StreamWriter(DataSourceStreamWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return writing.format_task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Each micro-batch's one Report, logged."""
        report = writing.commit_report(messages, str(self.options.entity))
        log.info("servicebus stream batch %d committed: %s", batchId, report)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = writing.commit_report(messages, str(self.options.entity))
        log.warning(
            "servicebus stream batch %d to %s aborted; tasks that finished: %s", batchId, self.options.entity, done
        )
