"""The Spark data source with a least-privilege key (an entity's Listen-only or Send-only policy,
``EntityPath``): reads with Listen, writes with Send; the other fails the job with the kit's line
naming the missing right. The existence check needs Manage: skipped, logged (``options.check_exists``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.emulator import Emulator
from tests.conftest import entity_keys_emulator
from tests.required import require_module

pyspark = require_module("pyspark")
from sbnotebook import spark as sbspark  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with entity_keys_emulator() as emulator:
        yield emulator


def test_listen_only_key_reads_and_cannot_write(spark: Any, emu: Emulator) -> None:
    core.send("q", [f"m{i}" for i in range(5)], connection=emu.connection_string)
    sp = sbspark.register(spark, emu.policy_connection_string("reader", "q"))
    rows = sp.read.format("servicebus").option("entity", "q").load().select("body_text").collect()
    assert sorted(r.body_text for r in rows) == [f"m{i}" for i in range(5)]
    df = sp.createDataFrame([("no",)], "body string").coalesce(1)
    with pytest.raises(Exception) as info:
        df.write.format("servicebus").mode("append").option("entity", "q").save()
    assert "'Send' right" in str(info.value) and "SharedAccessKey=" not in str(info.value)
    assert emu.broker.counts("q")["active"] == 5  # the peek changed nothing, nothing was added


def test_send_only_key_writes_and_cannot_read(spark: Any, emu: Emulator) -> None:
    sp = sbspark.register(spark, emu.policy_connection_string("writer", "q"))
    df = sp.createDataFrame([(f"w{i}",) for i in range(4)], "body string").coalesce(2)
    df.write.format("servicebus").mode("append").option("entity", "q").save()
    assert emu.broker.counts("q")["active"] == 4
    with pytest.raises(Exception) as info:
        sp.read.format("servicebus").option("entity", "q").load().collect()
    assert "'Listen' right" in str(info.value) and "SharedAccessKey=" not in str(info.value)
    assert emu.broker.counts("q")["active"] == 4
