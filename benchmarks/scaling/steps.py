"""scale.py's run (one emulator, one size, one latency), what a step is, and the steps on the queue
itself: fill, counts, scan, export, the Spark read, purge (batch delete and the receive path), stop and
restart. The dead-letter steps are in dead_letters.py; the order they run in is ``STEPS`` (scale.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sbnotebook import core

from .process import EmulatorProcess

QUEUE, PARTITIONED = "scale", "scale-partitioned"
EXPIRING, RETRY = "scale-expiring", "scale-retry"  # messages expire into EXPIRING's DLQ; resubmitted to RETRY
SIGNED = "scale-signed"  # messages carrying varied dead-letter descriptions (the signature steps)
DLQ = f"{EXPIRING}/$deadletterqueue"
TOPOLOGY = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "scale",
                "Queues": [
                    {"Name": QUEUE, "Properties": {}},
                    {"Name": PARTITIONED, "Properties": {"EnablePartitioning": True}},
                    {
                        "Name": EXPIRING,
                        "Properties": {"DefaultMessageTimeToLive": "PT1S", "DeadLetteringOnMessageExpiration": True},
                    },
                    {"Name": RETRY, "Properties": {}},
                    {"Name": SIGNED, "Properties": {}},
                ],
            }
        ]
    }
}
BODY = "x" * 1000  # with its properties, about 1 KB on the wire


@dataclass
class Run:
    """One emulator process, one size, one latency."""

    n: int
    latency_ms: float
    conn: str
    workdir: Path
    spark: Any = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    emulator_process: EmulatorProcess | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # a step's own figures, added to its row


@dataclass
class Step:
    name: str
    work: Callable[[Run], int]  # returns how many messages it handled (per-message time = time / that)
    per_call: bool = False  # a fixed-cost call: report time per call, not per message
    needs_spark: bool = False
    needs_data_dir: bool = False


def fill(run: Run, queue: str = QUEUE) -> int:
    report = core.send(queue, (BODY for _ in range(run.n)), max_in_flight=32, connection=run.conn)
    report.raise_for_failures()
    return run.n


def counts(run: Run) -> int:
    for _ in range(20):
        c = core.counts(QUEUE, connection=run.conn)
    assert c.active == run.n, c
    return 20


def scan(run: Run) -> int:
    seen = sum(len(page) for page in core.scan(QUEUE, connection=run.conn))
    assert seen == run.n, seen
    return seen


def export(run: Run) -> int:
    core.export_jsonl(QUEUE, run.workdir / "export.jsonl", connection=run.conn)
    return run.n


def spark_read(run: Run) -> int:
    from sbnotebook import spark as sbspark

    sbspark.register(run.spark, run.conn)
    df = run.spark.read.format("servicebus").option("entity", QUEUE).option("numPartitions", 4).load()
    df.write.format("noop").mode("overwrite").save()
    return run.n


def purge_batch(run: Run) -> int:
    report = core.purge(QUEUE, connection=run.conn)
    assert report.count("purged") == run.n and report.stats.get("batch_delete_requests"), report
    return run.n


def purge_receive(run: Run) -> int:
    report = core.purge(PARTITIONED, connection=run.conn)
    assert report.count("purged") == run.n and any("refused" in n for n in report.notes), report
    return run.n


def stop(run: Run) -> int:
    """Stop the emulator (SIGTERM) until it has exited: a durable one folds its journal into a
    snapshot then, when the journal's tail is large (``--data-dir`` only)."""
    assert run.emulator_process is not None
    run.emulator_process.stop()
    return run.n


def restart(run: Run) -> int:
    """Start the stopped emulator again on its data directory, until the restored queue answers
    its counts (``--data-dir`` only; after ``stop``)."""
    assert run.emulator_process is not None
    if run.emulator_process.proc is not None:
        run.emulator_process.stop()
    run.emulator_process.start()
    run.conn = run.emulator_process.conn
    assert core.counts(QUEUE, connection=run.conn).active == run.n
    return run.n
