"""The old names of docs/names.md that need a Spark session (``sbspark.settle``'s, ``from_spark``'s,
``register``'s and ``write``'s keywords, ``sbspark.release`` and the action ``"release"``): each
still works, on this test's emulator, as its new name does, and says once what replaced it."""

from __future__ import annotations

from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook.core import ConfigurationError
from sbnotebook.emulator import Emulator
from tests.helpers import send
from tests.project.oldnames import once, said
from tests.project.test_names import OLD, codes
from tests.required import require_module
from tests.spark.helpers import read

require_module("pyspark")
from sbnotebook import spark as sbspark  # noqa: E402

__all__ = ["said"]  # the fixture, for pytest

CHECKED = {
    ("parallelism", "sbspark.settle"),
    ('"release"', "sbspark.settle"),
    ("release", "sbspark"),
    ("limit", "sbspark.from_spark"),
    ("namespace", "sbspark.register"),
    ("namespace", "sbspark.write"),
    ("default_partitions", "sbspark.register"),
    ("batch", "sbspark.write"),
}


def test_these_are_the_old_names_that_need_a_spark_session() -> None:
    spark_places = ("sbspark", "sbspark.settle", "sbspark.from_spark", "sbspark.register", "sbspark.write")
    rows = {(r[0].strip("`"), p) for r in OLD for p in codes(r[1]) if p in spark_places}
    assert rows == CHECKED


def _states(emulator: Emulator) -> list[str]:
    return sorted(r["state"] for r in core.peek("q", max_messages=100, connection=emulator.connection_string))


def test_settles_old_names_still_settle(sp: Any, client: ServiceBusClient, emulator: Emulator, said: Any) -> None:
    """settle(parallelism=) is max_in_flight=, the action "release" and sbspark.release() are
    requeue: fresh copies back to active, the deferred originals completed."""
    send(client, "q", *[f"m{i}" for i in range(9)])
    df = read(sp, "q", mode="defer", maxMessages=9, numPartitions=1, waitSeconds=2).cache()
    part = [df.where(f"body_text in ('m{3 * k}', 'm{3 * k + 1}', 'm{3 * k + 2}')") for k in range(3)]
    assert df.count() == 9 and _states(emulator) == ["deferred"] * 9
    assert sbspark.settle(part[0], "complete", parallelism=2).count("completed") == 3
    once(said, "sbspark.settle(parallelism=)", "sbspark.settle(max_in_flight=)")
    assert sbspark.settle(part[1], "release").count("completed") == 3  # type: ignore[arg-type]
    once(said, 'sbspark.settle(action="release")', 'action="requeue"')
    assert sbspark.release(part[2]).count("completed") == 3
    once(said, "sbspark.release()", "sbspark.requeue()")
    assert _states(emulator) == ["active"] * 6  # the requeued copies; the completed ones gone
    with pytest.raises(TypeError, match="not also parallelism="):
        sbspark.settle(df, "complete", parallelism=1, max_in_flight=1)


def test_from_spark_limit_is_max_messages(sp: Any, said: Any) -> None:
    df = sbspark.to_spark([{"body_text": f"m{i}", "sequence_number": i} for i in range(5)], sp)
    assert len(sbspark.from_spark(df, limit=2)) == len(sbspark.from_spark(df, max_messages=2)) == 2
    assert len(sbspark.from_spark(df)) == 5
    once(said, "sbspark.from_spark(limit=)", "sbspark.from_spark(max_messages=)")


def test_register_and_write_take_their_old_keywords(
    sp: Any, client: ServiceBusClient, emulator: Emulator, said: Any
) -> None:
    """namespace= is fully_qualified_namespace= (a host name that is none is refused the same way,
    before any job), default_partitions= is default_num_partitions= (the partitions of a read that
    gives none)."""
    bad = "not a host name!"
    rows = sp.createDataFrame([("m",)], "body string")
    for call in (lambda kw: sbspark.register(sp, **kw), lambda kw: sbspark.write(rows, "q", **kw)):
        errors = []
        for keyword in ("namespace", "fully_qualified_namespace"):
            with pytest.raises(ConfigurationError) as refused:
                call({keyword: bad})
            errors.append(str(refused.value))
        assert errors[0] == errors[1] and bad in errors[0]
    once(said, "sbspark.register(namespace=)", "fully_qualified_namespace=")
    once(said, "sbspark.write(namespace=)", "fully_qualified_namespace=")
    send(client, "q", *[f"m{i}" for i in range(40)])
    partitions = []
    for keyword in ("default_partitions", "default_num_partitions", None):
        given = {keyword: 3} if keyword else {}
        sbspark.register(sp, emulator.connection_string, **given)
        partitions.append(sp.read.format("servicebus").option("entity", "q").load().rdd.getNumPartitions())
    assert partitions == [3, 3, sbspark.DEFAULT_PARTITIONS], partitions
    once(said, "sbspark.register(default_partitions=)", "default_num_partitions=")


def test_writes_batch_is_one_per_send_turned(sp: Any, emulator: Emulator, said: Any) -> None:
    """batch=False is one_per_send=True (the old name said the opposite: core.send's, whose
    operations show it, is in tests/project/test_old_keywords.py); both at once are refused."""
    sbspark.register(sp, emulator.connection_string)
    rows = sp.createDataFrame([(f"m{i}",) for i in range(3)], "body string")
    assert sbspark.write(rows, "q", batch=False).count("sent") == 3
    once(said, "sbspark.write(batch=)", "one_per_send=")
    assert sbspark.write(rows, "q", one_per_send=True).count("sent") == 3
    assert sorted(r["body_text"] for r in core.peek("q", connection=emulator.connection_string)) == sorted(
        [f"m{i}" for i in range(3)] * 2
    )
    with pytest.raises(TypeError, match="not also batch="):
        sbspark.write(rows, "q", batch=True, one_per_send=False)
