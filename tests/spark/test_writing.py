"""One Report for every Spark write path (sbnotebook/spark/writing.py): the tasks of a
``format("servicebus")`` write and of ``sbspark.write`` hand back the same result rows, folded into
the one core Report. Runs the data source's writer in this process (no JVM) against the emulator,
with the real SDK; the same writes through Spark are in tests/spark/test_source.py."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook.emulator import Emulator
from tests.helpers import drain
from tests.required import require_module

require_module("pyspark")
from pyspark.sql import Row  # noqa: E402
from pyspark.sql.types import StringType, StructField, StructType  # noqa: E402

from sbnotebook.spark import (  # noqa: E402
    SendFailedError,
    ServiceBusDataSource,
    writing,
)

SCHEMA = StructType([StructField("body", StringType()), StructField("message_id", StringType())])


def writer(emulator: Emulator, **options: str) -> Any:
    source = ServiceBusDataSource({"entity": "q", "connectionString": emulator.connection_string, **options})
    return source.writer(SCHEMA, False)


def test_the_format_write_commits_one_core_report(
    emulator: Emulator, client: ServiceBusClient, caplog: pytest.LogCaptureFixture
) -> None:
    w = writer(emulator)
    tasks = [
        w.write(iter([Row(body=f"{t}-{i}", message_id=f"id-{t}-{i}") for i in range(n)])) for t, n in [(0, 3), (1, 2)]
    ]
    report = writing.commit_report([*tasks, None], "q")  # None: a task Spark lost
    assert isinstance(report, core.Report)
    assert (report.operation, report.entity, report.count("sent"), report.total, report.ok) == ("send", "q", 5, 5, True)
    assert report.stats["operations"] >= 2 and report.elapsed > 0
    with caplog.at_level(logging.INFO, logger="sbnotebook.spark"):
        w.commit(tasks)
    (line,) = [r for r in caplog.records if "write committed" in r.getMessage()]
    assert isinstance(line.args[0], core.Report) and "send q: 5 sent of 5" in line.getMessage()
    assert sorted(str(m) for m in drain(client, "q")) == ["0-0", "0-1", "0-2", "1-0", "1-1"]


def test_a_refused_message_fails_the_format_task_and_comes_back_whole_from_write_rows(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    emulator.reject_sends("q", 1, "quota-exceeded")
    w = writer(emulator, onePerSend="true", maxInFlight="1")
    with pytest.raises(SendFailedError, match=r"1 of 3 messages to q failed: row 0: amqp:resource-limit-exceeded"):
        w.write(iter([Row(body=b, message_id=b) for b in "abc"]))
    # The rows sbspark.write's tasks yield carry every field of the failure through Spark's types.
    emulator.reject_sends("q", 1, "quota-exceeded")
    sent = writing.send_rows(w.options, [{"body": b, "message_id": b} for b in "xyz"])
    report = writing.fold(writing.task_rows(sent, task=7), "q")
    assert (report.count("sent"), report.failed, report.stats["tasks"]) == (2, 1, 1)
    assert report.failures == sent.failures and report.failures[0].tracking_id
    assert sorted(str(m) for m in drain(client, "q")) == ["b", "c", "y", "z"]


def test_the_result_columns_are_the_outcome_fields() -> None:
    """Derived from core's Outcome, not written out again: a field added there reaches the notebook."""
    fields = [f.name for f in dataclasses.fields(core.Outcome)]
    names = [name for name, _ in writing.RESULT_COLUMNS]
    assert names[-len(fields) :] == fields and set(fields) == set(core.Report("send", "q").to_pandas().columns)
    assert "`retryable` boolean" in writing.RESULT_DDL and "`sequence_number` bigint" in writing.RESULT_DDL
