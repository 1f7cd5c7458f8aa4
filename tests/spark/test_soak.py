"""The chaos soak through the Spark data source (the long one: ``python benchmarks/chaos_soak.py
--spark``): besides the core paths, rounds read with ``mode=defer`` on two partitions and settle
with ``sbnotebook.spark.settle``, and send with ``sbnotebook.spark.write``, while the emulator
process has faults injected and is killed and restarted, sometimes in the middle of a Spark job.
Every message must be accounted for exactly once."""

from __future__ import annotations

from typing import Any

from benchmarks.chaos_soak import run


def test_spark_reads_settles_and_writes_account_for_every_message_through_restarts(spark: Any) -> None:
    lines: list[str] = []
    figures = run(messages=800, restarts=2, seed=11, log=lines.append, spark=spark)
    print(figures.line())
    for error, n in figures.errors.most_common(8):
        print(f"  reported {n}x: {error}")
    assert figures.ok, "\n".join([figures.line(), *figures.problems[:20], *figures.unreported[:20]])
    assert figures.lost == 0 and figures.restarts >= 2 and figures.faults_injected > 0
    assert figures.spark_read > 0 and figures.spark_settled > 0 and figures.spark_written > 0
