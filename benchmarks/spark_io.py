"""Spark reads and writes against an emulator in its own process, as ratios measured in one run.

For each latency (``--latency-ms``, default 0 and 50: the emulator delays every reply by that much,
what a cluster far from its namespace sees), on the same ``--messages`` messages:

  baseline : one plain SDK receiver peeking the whole queue (``peek_messages`` in a loop, the
             fastest thing a user writes by hand)
  fixed    : the whole query over a queue holding one message (planning, one task, the result),
             once the session's Python workers have their connections (the first query opens them)
  read     : the whole query ``spark.read.format("servicebus")`` with 1, 2 and 4 partitions
             (``df.write.format("noop")``: every row read, nothing kept), with the default
             ``maxInFlight`` (each partition peeks 10 windows at once) and with ``maxInFlight`` 1
             (one peek at a time per partition: partitions are then the only parallelism)
  write    : ``sbnotebook.spark.write`` of the same number of rows with 2 partitions, against
             ``core.send`` from one process
  first    : (``--first-query``) the 4-partition query on an entity no worker has read yet, against
             the same query again (2,000 messages, a new queue each sample, the Python workers
             already started and connected): issue 31's target, the first within 1.5x of a warm one
  bodies   : the 4-partition read with ``bodyFormat=json`` (schema inferred at planning, and pinned
             with ``bodySchema``) and ``bodyFormat=text`` against ``bodyFormat=binary`` (the default),
             measured in alternation; issue 33's target: JSON parsing adds at most 25 %
             (``--bodies-only`` measures just these)

and prints the ratios issue 15 sets (docs/benchmarks.md): 2 partitions >= 1.6x and 4 partitions
>= 2.5x faster than 1, 4 partitions >= 2x faster than the single SDK receiver, fixed cost <= 1 s.
The ratios are judged on the defaults. Spark runs ``local[4]``: four task slots, on however many
cores the machine has; with the defaults one partition is already bound by the CPU of its Python
worker, not by round trips, so on a 2-core machine more partitions add little (docs/benchmarks.md).

  window   : (``--time-window``) a read bounded by enqueued time (``enqueuedAfter`` /
             ``enqueuedBefore``): ``--messages`` messages sent in 10 groups at distinct times, the
             window one group; its planning (snapshot and bisection: time and peeks) and its read,
             against a read of everything. The planner and the partitions' reads run in this process,
             as Spark would run them (no JVM: Spark's own cost is the same for both)

  pushdown : (``--pushdown``) the same window through Spark (``local[4]``, the JVM included), three
             whole queries counting the window's rows, alternated, the best of each: the window
             as a ``where`` pushed down (``pushFilters``, pyspark 4.1+), as options
             (``enqueuedAfter`` / ``enqueuedBefore``), and as a ``where`` without the option (a read
             of everything that Spark filters)

    python benchmarks/spark_io.py [--messages 20000] [--latency-ms 0 50]
                                  [--bodies-only | --first-query | --time-window | --pushdown]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from _common import start_emulator  # the one way the benchmarks start `sbnotebook emulator`
from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook import spark as sbspark

TARGETS = {"2 vs 1 partitions": 1.6, "4 vs 1 partitions": 2.5, "4 partitions vs SDK receiver": 2.0}
FIXED_COST_TARGET = 1.0
FIRST_QUERY_TARGET = 1.5  # issue 31: the first query on an entity within 1.5x of a warm one
FIRST_QUERY_MESSAGES = 2_000
FIRST_QUERY_SAMPLES = 3
TARGET_LATENCY_MS = 50.0


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def sdk_peek_all(conn: str, queue: str) -> int:
    """What a user writes by hand: one receiver, peek pages of 250 until the queue ends."""
    seen, after = 0, 0
    with ServiceBusClient.from_connection_string(conn) as client, client.get_queue_receiver(queue) as receiver:
        while page := receiver.peek_messages(max_message_count=250, sequence_number=after + 1):
            seen += len(page)
            after = int(page[-1].sequence_number)
    return seen


def whole_query(spark: Any, queue: str, partitions: int, in_flight: int | None = None, **options: str) -> float:
    def run() -> None:
        reader = spark.read.format("servicebus").option("entity", queue).option("numPartitions", partitions)
        if in_flight is not None:
            reader = reader.option("maxInFlight", in_flight)
        for key, value in options.items():
            reader = reader.option(key, value)
        reader.load().write.format("noop").mode("overwrite").save()

    return timed(run)[1]


BODY_READS = {
    "binary": {},
    "json": {"bodyFormat": "json"},
    "json_pinned": {"bodyFormat": "json", "bodySchema": "order bigint, total bigint"},
    "text": {"bodyFormat": "text"},
}
BODY_PARSING_TARGET = 1.25


def measure_bodies(spark: Any, got: dict[str, float], rounds: int = 4) -> None:
    """Each body format in turn, `rounds` times, the best of each: alternating spreads the machine's
    drift over all of them."""
    times: dict[str, list[float]] = {k: [] for k in BODY_READS}
    for _ in range(rounds):
        for name, options in BODY_READS.items():
            times[name].append(whole_query(spark, "orders", 4, **options))
    for name, values in times.items():
        got[f"body_{name}"] = min(values)


def measure(spark: Any, n: int, latency_ms: float, bodies_only: bool = False) -> dict[str, float]:
    proc, conn = start_emulator(latency_ms)
    try:
        sbspark.register(spark, conn)
        filled = core.send(
            "orders", ({"order": i, "total": i % 97} for i in range(n)), max_in_flight=32, connection=conn
        )
        filled.raise_for_failures()
        core.send("results", ["one"], connection=conn).raise_for_failures()
        # Warm: every Python worker of local[4] opens its live connection once (a worker keeps it for
        # later queries, as on a cluster); what is measured below is the steady state.
        whole_query(spark, "orders", 4)
        whole_query(spark, "results", 4)
        got: dict[str, float] = {}
        measure_bodies(spark, got)
        if bodies_only:
            return got
        # min of 5: the first queries after a large read run ~0.5 s slower (seen at 0 and 50 ms), then settle
        got["fixed"] = min(whole_query(spark, "results", 1) for _ in range(5))
        rows, got["sdk"] = timed(lambda: sdk_peek_all(conn, "orders"))
        assert rows == n, rows
        scan_all = lambda: sum(len(p) for p in core.scan("orders", connection=conn))  # noqa: E731
        scan_all()  # opens the driver's scan links once, as the workers' were opened above
        got["scan"] = min(timed(scan_all)[1] for _ in range(2))
        for partitions in (1, 2, 4):
            got[f"p{partitions}"] = min(whole_query(spark, "orders", partitions) for _ in range(2))
            # Each partition one window at a time (maxInFlight 1): partitions are then the only
            # parallelism, what shows whether they scale when each one waits on round trips.
            got[f"q{partitions}"] = min(whole_query(spark, "orders", partitions, 1) for _ in range(2))
        counted = spark.read.format("servicebus").option("entity", "orders").load().count()
        assert counted == n, counted

        records = [{"body": f'{{"result": {i}}}'} for i in range(n)]
        report, got["send"] = timed(lambda: core.send("results", records, max_in_flight=16, connection=conn))
        report.raise_for_failures()
        frame = spark.createDataFrame([(r["body"],) for r in records], "body string").repartition(2).cache()
        frame.count()
        written, got["write"] = timed(lambda: sbspark.write(frame, "results", max_in_flight=16))
        assert written.count("sent") == n, written
        frame.unpersist()
        return got
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def measure_first_query(spark: Any, latency_ms: float) -> dict[str, list[float]]:
    """Each sample: a new queue (no worker has a link to it), filled, read once (first), then twice
    more (warm: the best of two). The workers were started and connected on another queue first, so
    the first query pays only what a new entity costs: its links, not the workers' start."""
    proc, conn = start_emulator(latency_ms)
    try:
        sbspark.register(spark, conn)
        # Enough messages for four partitions: every Python worker starts and connects here.
        core.send("orders", (f"{i}" for i in range(FIRST_QUERY_MESSAGES)), connection=conn).raise_for_failures()
        whole_query(spark, "orders", 4)
        first: list[float] = []
        warm: list[float] = []
        for k in range(FIRST_QUERY_SAMPLES):
            queue = f"fresh-{k}"
            core.create_entity(queue, connection=conn)
            core.send(queue, (f"{i}" for i in range(FIRST_QUERY_MESSAGES)), connection=conn).raise_for_failures()
            first.append(whole_query(spark, queue, 4))
            warm.append(min(whole_query(spark, queue, 4) for _ in range(2)))
        return {"first": first, "warm": warm}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def report_first_query(latency_ms: float, t: dict[str, list[float]]) -> list[str]:
    print(
        f"\n== first query on a new entity, {FIRST_QUERY_MESSAGES} messages, 4 partitions, "
        f"emulator latency {latency_ms:g} ms (seconds)"
    )
    ratios = [f / w for f, w in zip(t["first"], t["warm"], strict=True)]
    for f, w, r in zip(t["first"], t["warm"], ratios, strict=True):
        print(f"  first {f:6.2f} s   warm {w:6.2f} s   {r:5.2f}x")
    worst = max(ratios)
    ok = worst <= FIRST_QUERY_TARGET
    print(f"  worst {worst:.2f}x  target <= {FIRST_QUERY_TARGET}x  " + ("ok" if ok else "MISSED"))
    return [] if ok else [f"first query at {latency_ms:g} ms"]


def report_bodies(n: int, latency_ms: float, t: dict[str, float]) -> list[str]:
    base = t["body_binary"]
    print(f"\n== {n} messages, emulator latency {latency_ms:g} ms: body formats, 4 partitions (seconds)")
    for name in BODY_READS:
        print(f"  bodyFormat {name:<12} {t[f'body_{name}']:7.2f} s  {t[f'body_{name}'] / base:5.2f}x of binary")
    worst = max(t["body_json"], t["body_json_pinned"]) / base
    ok = worst <= BODY_PARSING_TARGET
    print(
        f"  JSON parsing adds {100 * (worst - 1):.0f} %  target <= {100 * (BODY_PARSING_TARGET - 1):.0f} %  "
        + ("ok" if ok else "MISSED")
    )
    return [] if ok else [f"JSON parsing at {latency_ms:g} ms"]


def report(n: int, latency_ms: float, t: dict[str, float]) -> list[str]:
    missed = report_bodies(n, latency_ms, t)
    if "p1" not in t:
        return missed
    ratios = {
        "2 vs 1 partitions": t["p1"] / t["p2"],
        "4 vs 1 partitions": t["p1"] / t["p4"],
        "4 partitions vs SDK receiver": t["sdk"] / t["p4"],
    }
    print(f"\n== {n} messages, emulator latency {latency_ms:g} ms (whole query, seconds; rows/s)")
    print(f"  SDK receiver, peek loop      {t['sdk']:7.2f} s  {n / t['sdk']:>8.0f}/s")
    print(f"  core.scan, one process       {t['scan']:7.2f} s  {n / t['scan']:>8.0f}/s")
    for p in (1, 2, 4):
        print(f"  spark peek, {p} partition(s)  {t[f'p{p}']:7.2f} s  {n / t[f'p{p}']:>8.0f}/s")
    for p in (1, 2, 4):
        print(
            f"  the same, maxInFlight 1, {p}   {t[f'q{p}']:7.2f} s  {n / t[f'q{p}']:>8.0f}/s"
            f"  ({t['q1'] / t[f'q{p}']:.2f}x of 1 partition)"
        )
    print(f"  fixed cost (1-message query) {t['fixed']:7.2f} s   target <= {FIXED_COST_TARGET:.1f} s")
    judged = latency_ms >= TARGET_LATENCY_MS  # the targets are set for a namespace 50 ms away
    for name, value in ratios.items():
        ok = value >= TARGETS[name]
        verdict = ("ok" if ok else "MISSED") if judged else "(targets apply from 50 ms)"
        print(f"  {name:<29}{value:6.2f}x  target >= {TARGETS[name]}x  {verdict}")
        if judged and not ok:
            missed.append(f"{name} at {latency_ms:g} ms")
    if judged and t["fixed"] > FIXED_COST_TARGET:
        missed.append(f"fixed cost at {latency_ms:g} ms")
    print(
        f"  write: core.send {n / t['send']:.0f}/s, spark write 2 partitions {n / t['write']:.0f}/s "
        f"({t['send'] / t['write']:.2f} of core.send)"
    )
    return missed


def measure_time_window(n: int, latency_ms: float) -> list[str]:
    from sbnotebook.core import EntityPath, resolve, snapshot
    from sbnotebook.core.operations.bounds import TimeWindow, time_bounds
    from sbnotebook.spark import reading
    from sbnotebook.spark.schema import arrow_schema

    proc, text = start_emulator(latency_ms)
    try:
        conn = resolve(text)
        path = EntityPath.parse("orders")
        group, start, end = _ten_groups(n, conn)
        window = TimeWindow(start, end)
        snapshot(conn, path, 1)  # warm: links open
        found, t_snap = timed(lambda: snapshot(conn, path, 1))
        assert found is not None
        bounds, t_bisect = timed(lambda: time_bounds(conn, path, found[0], found[1], window))
        ranges, t_plan = timed(lambda: reading.plan_peek(conn, path, 1, 4, None, window))

        def read(parts: list[reading.PeekRange]) -> int:
            return sum(b.num_rows for p in parts for b in reading.read_peek(conn, path, p, arrow_schema(), 10))

        read(reading.plan_peek(conn, path, 1, 4, None))  # warm: every link of the reads open
        rows, t_read = timed(lambda: read(ranges))
        every, t_all = timed(lambda: read(reading.plan_peek(conn, path, 1, 4, None)))
    finally:
        proc.terminate()
        proc.wait()
    assert bounds is not None and rows == group and every == n, (bounds, rows, every)
    print(
        f"\ntime window, {n:,} messages, {latency_ms:g} ms: one group of {group:,} in the window\n"
        f"  planning: snapshot {t_snap * 1000:.0f} ms + bisection {t_bisect * 1000:.0f} ms ({bounds.peeks} peeks); "
        f"plan_peek with the window {t_plan * 1000:.0f} ms\n"
        f"  windowed read (planning included) {t_plan + t_read:.2f} s vs reading everything {t_all:.2f} s "
        f"= {t_all / (t_plan + t_read):.1f}x; rows {rows:,} of {every:,}"
    )
    return []


def _ten_groups(n: int, connection: Any) -> tuple[int, Any, Any]:
    """``n`` messages to orders in ten groups sent 50 ms apart; (group size, the enqueued time of
    group 6's first message, that of group 7's first): the window both time-bound measures read."""
    group = n // 10
    for g in range(10):
        core.send(
            "orders", (f"g{g}-{i}" for i in range(group)), max_in_flight=32, connection=connection
        ).raise_for_failures()
        time.sleep(0.05)

    def first_of(g: int) -> Any:
        return core.peek_page("orders", from_sequence_number=group * g + 1, max_messages=1, connection=connection)[0][
            "enqueued_time"
        ]

    return group, first_of(6), first_of(7)


def measure_pushdown(n: int, latency_ms: float, rounds: int = 2) -> list[str]:
    """The window of ``measure_time_window`` read through Spark three ways (module docstring)."""
    from pyspark.sql import functions as F

    proc, text = start_emulator(latency_ms)
    spark = sbspark.local_session("spark-io-pushdown", cores=4)
    try:
        sbspark.register(spark, text)
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        group, start, end = _ten_groups(n, text)
        col = F.col("enqueued_time")

        def load(**options: str) -> Any:  # a new DataFrame per query (docs/spark.md, "Filter pushdown")
            return spark.read.format("servicebus").options(entity="orders", numPartitions="4", **options).load()

        queries = {
            "pushed": lambda: load(pushFilters="true").where((col >= start) & (col < end)).count(),
            "options": lambda: load(enqueuedAfter=start.isoformat(), enqueuedBefore=end.isoformat()).count(),
            "where, not pushed": lambda: load().where((col >= start) & (col < end)).count(),
        }
        times: dict[str, list[float]] = {k: [] for k in queries}
        load().count()  # warm: the Python workers and their links
        for _ in range(rounds):
            for name, query in queries.items():
                rows, took = timed(query)
                assert rows == group, (name, rows)
                times[name].append(took)
    finally:
        spark.stop()
        proc.terminate()
        proc.wait()
    best = {k: min(v) for k, v in times.items()}
    print(
        f"\npushdown, {n:,} messages, {latency_ms:g} ms: one group of {group:,} in the window, best of {rounds}\n"
        + "\n".join(f"  {name}: {t:.2f} s" for name, t in best.items())
        + f"\n  not pushed / pushed = {best['where, not pushed'] / best['pushed']:.1f}x; "
        f"pushed / options = {best['pushed'] / best['options']:.2f}"
    )
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 50.0])
    parser.add_argument("--bodies-only", action="store_true", help="measure only the body formats")
    parser.add_argument("--first-query", action="store_true", help="measure only the first query on a new entity")
    parser.add_argument("--time-window", action="store_true", help="measure only a read bounded by enqueued time")
    parser.add_argument("--pushdown", action="store_true", help="measure only the window through Spark, pushed or not")
    args = parser.parse_args()
    if args.pushdown:
        for latency in args.latency_ms:
            measure_pushdown(args.messages, latency)
        return
    if args.time_window:
        for latency in args.latency_ms:
            measure_time_window(args.messages, latency)
        return
    spark = sbspark.local_session("spark-io-benchmark", cores=4)
    missed: list[str] = []
    try:
        for latency in args.latency_ms:
            if args.first_query:
                missed += report_first_query(latency, measure_first_query(spark, latency))
                continue
            missed += report(args.messages, latency, measure(spark, args.messages, latency, args.bodies_only))
    finally:
        spark.stop()
    print("\nall targets met" if not missed else "\nmissed: " + "; ".join(missed))


if __name__ == "__main__":
    main()
