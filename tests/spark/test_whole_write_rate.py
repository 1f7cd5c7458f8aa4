"""A whole Spark write at one rate: ``sbspark.write(df, entity, rate="200/s")`` through a local Spark
(local[2]: the two tasks it makes run at once, each at half the rate), and the option ``rate`` of a
``format("servicebus")`` write refused. The broker's enqueued times of the 600 messages, counted per
second of the run (tests/core/incidents/test_replay_rate.py's ``steady``, the emulator on the system
clock): no second above 1.2x the rate, and the write no faster than 0.9 of what the rate allows;
the same rows written without a rate fail that check (they arrive in a burst)."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pytest

from sbnotebook.core import InvalidInputError
from sbnotebook.emulator import Emulator
from tests.core.incidents import test_replay_rate as rates
from tests.helpers import QuickCloseClient
from tests.interrupting import peek_all
from tests.required import require_module

require_module("pyspark")
from sbnotebook import spark as sbspark  # noqa: E402
from sbnotebook.spark import OptionError  # noqa: E402
from sbnotebook.spark.options import check_known  # noqa: E402

pytestmark = pytest.mark.slow
N, RATE = 600, 200.0
INSTEAD = "give it to sbspark.write(df, entity, rate=...), which splits it among the tasks it makes"


def rows(sp: Any, prefix: str) -> Any:
    return sp.createDataFrame([(f"{prefix}-{i}", f"{prefix}-{i}") for i in range(N)], "body string, message_id string")


def arrived(emulator: Emulator, queue: str, prefix: str) -> tuple[Counter[str], list[dt.datetime]]:
    """The message ids that start with ``prefix`` on ``queue`` (how often each), and their enqueued
    times as the broker stamped them."""
    with QuickCloseClient.from_connection_string(emulator.connection_string) as client:
        found = [m for m in peek_all(client, queue) if str(m.message_id).startswith(f"{prefix}-")]
    return Counter(str(m.message_id) for m in found), [m.enqueued_time_utc for m in found]


def test_a_write_at_a_rate_keeps_the_whole_write_to_it_on_the_broker(sp: Any, emulator: Emulator) -> None:
    burst = sbspark.write(rows(sp, "fast"), "q")  # no rate: as fast as max_in_flight allows
    assert burst.ok and burst.count("sent") == N, burst
    with pytest.raises(AssertionError):  # the check below fails on a write without a rate
        rates.steady(arrived(emulator, "q", "fast")[1], RATE)

    report = sbspark.write(rows(sp, "m"), "q", rate="12000/m")  # 200/s, in core's one grammar
    assert report.ok and report.count("sent") == N, report
    assert report.stats["tasks"] == sbspark.RATE_TASKS, report.stats  # the tasks it made, each at its share
    ids, times = arrived(emulator, "q", "m")
    assert ids == Counter({f"m-{i}": 1 for i in range(N)})  # every row once
    rates.steady(times, RATE)
    assert (max(times) - min(times)).total_seconds() >= 0.9 * N / RATE, rates.per_second(times)
    assert report.elapsed >= 0.9 * N / RATE, report.elapsed


def test_a_rate_option_of_a_format_write_is_refused_naming_what_takes_it(sp: Any, emulator: Emulator) -> None:
    df = rows(sp, "r")
    with pytest.raises(Exception) as refused:  # Spark wraps it in its own kind of error
        df.write.format("servicebus").mode("append").option("entity", "q").option("rate", "200/s").save()
    said = str(refused.value)
    assert "servicebus: a write takes no option 'rate'" in said and INSTEAD in said, said
    assert "or give each task's rate as ratePerPartition." in said, said
    assert emulator.broker.counts("q")["active"] == 0  # refused before anything was sent


def test_a_write_rate_goes_alone_and_tasks_with_it_refused_before_any_job(sp: Any, emulator: Emulator) -> None:
    df = rows(sp, "r")
    with pytest.raises(OptionError, match=r"^servicebus: give rate \(the whole write's\) or rate_per_partition"):
        sbspark.write(df, "q", rate="200/s", rate_per_partition="100/s")
    with pytest.raises(OptionError, match=r"^servicebus: tasks splits a rate among the write's tasks: give rate"):
        sbspark.write(df, "q", tasks=2)
    with pytest.raises(OptionError, match=r"^servicebus: tasks must be a whole number of 1 or more, not 0\.$"):
        sbspark.write(df, "q", rate="200/s", tasks=0)
    with pytest.raises(InvalidInputError, match=r"^rate takes messages per second or per minute"):
        sbspark.write(df, "q", rate="200")
    assert emulator.broker.counts("q")["active"] == 0


def test_a_rate_option_of_a_stream_write_is_refused_naming_rate_per_partition() -> None:
    with pytest.raises(OptionError) as refused:
        check_known({"entity": "q", "rate": "200/s"}, "stream write")
    assert str(refused.value) == (
        "servicebus: a stream write takes no option 'rate': its tasks cannot see one another, so none of them "
        "can keep the whole write to one rate: give each task's rate as ratePerPartition (the write's is that "
        "times the tasks at once)."
    )
    check_known({"entity": "q", "ratePerPartition": "100/s"}, "stream write")  # each task's rate: taken
