"""A Spark write at a rate: ``ratePerPartition`` (``sbspark.write(rate_per_partition=)``) holds each
task to that many messages per second. Tasks run on executors that cannot see one another, so the
write's rate is the option times the tasks sending at once: here two tasks at 100/s, run at once
on two threads of this process (the data source's writer, no JVM, as tests/spark/test_writing.py),
and the broker's enqueued times of the 600 messages, counted per second, show no second above 1.2x
200/s and a write no faster than 0.9 of what 200/s allows (tests/core/incidents/test_replay_rate.py's
checks, shown failing there on a burst and on a run too fast)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from sbnotebook.emulator import Emulator
from tests.core.incidents import test_replay_rate as rates
from tests.required import require_module

require_module("pyspark")
from pyspark.sql import Row  # noqa: E402
from pyspark.sql.types import StringType, StructField, StructType  # noqa: E402

from sbnotebook.spark import OptionError, ServiceBusDataSource, writing  # noqa: E402

emulator = rates.emulator  # the system clock: the broker stamps each message's enqueued time
SCHEMA = StructType([StructField("body", StringType()), StructField("message_id", StringType())])
PER_TASK, TASKS, ROWS = 100.0, 2, 300


def writer(emulator: Emulator, **options: str) -> Any:
    source = ServiceBusDataSource({"entity": "plain", "connectionString": emulator.connection_string, **options})
    return source.writer(SCHEMA, False)


def test_tasks_at_a_rate_per_partition_keep_the_write_to_it_times_the_tasks_on_the_broker(emulator: Emulator) -> None:
    w = writer(emulator, ratePerPartition="6000/m")  # 100/s, in core's one grammar
    done: list[Any] = []

    def task(t: int) -> None:
        done.append(w.write(iter([Row(body=f"{t}-{i}", message_id=f"{t}-{i}") for i in range(ROWS)])))

    tasks = [threading.Thread(target=task, args=(t,)) for t in range(TASKS)]
    for t in tasks:
        t.start()
    for t in tasks:
        t.join()
    report = writing.commit_report(done, "plain")
    assert report.ok and report.count("sent") == TASKS * ROWS, report
    times = rates.enqueued(emulator, "plain")
    assert len(times) == TASKS * ROWS
    rates.steady(times, PER_TASK * TASKS)


def test_the_rows_of_sbspark_write_keep_to_the_rate_per_partition(emulator: Emulator) -> None:
    """The task ``sbspark.write`` runs over its Arrow batches (``writing.arrow_task``), alone: 100/s."""
    import pyarrow as pa

    opts = writer(emulator, ratePerPartition="100/s").options
    batches = [pa.RecordBatch.from_pylist([{"body": f"b-{i}", "message_id": f"m-{i}"} for i in range(ROWS)])]
    (rows,) = list(writing.arrow_task(opts)(iter(batches)))
    report = writing.fold(rows.to_pylist(), "plain")
    assert report.ok and report.count("sent") == ROWS, report
    rates.steady(rates.enqueued(emulator, "plain"), PER_TASK)


@pytest.mark.parametrize("rate", ["100", "fast", "0/s"])
def test_a_wrong_rate_per_partition_is_refused_before_anything_is_sent(emulator: Emulator, rate: str) -> None:
    with pytest.raises(OptionError, match="option ratePerPartition takes messages per second or per minute"):
        writer(emulator, ratePerPartition=rate)
