"""Spark reads and writes against the emulator, compared with the settlement library in one process.

In the same run, on the same data:
  read : `mode=peek` into a DataFrame with 1 and 2 partitions, vs core.scan in one process
  write: `df.write.format("servicebus")` with 2 partitions, vs core.send from one process
Reports rows/s, the ratio to the single-process loop, and the speed-up from 1 to 2 partitions.
The emulator runs in its own process (as a namespace would), so it does not share the driver's CPU.

    python benchmarks/spark_io.py [--messages 100000]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time

from sbnotebook import core
from sbnotebook import spark as sbspark


def start_emulator() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sbnotebook.emulator", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    for _ in range(6):
        line = proc.stdout.readline().strip()
        if re.match(r"^Endpoint=sb://", line):
            return proc, line
    proc.kill()
    raise RuntimeError("the emulator did not start")


def timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    n = parser.parse_args().messages
    proc, conn = start_emulator()
    try:
        spark = sbspark.local_session("spark-io-benchmark")
        sbspark.register(spark, conn)
        filled = core.send(
            "orders", ({"order": i, "total": i % 97} for i in range(n)), max_in_flight=16, connection=conn
        )
        assert filled.ok, filled
        print(f"{n} messages in 'orders' ({filled.rate:.0f} msg/s to fill)")

        def loop_read() -> int:
            return sum(len(page) for page in core.scan("orders", connection=conn))

        rows, base_read = timed(loop_read)
        assert rows == n, rows
        reads = {}
        for partitions in (1, 2):
            df = spark.read.format("servicebus").option("entity", "orders").option("numPartitions", partitions).load()
            _, seconds = timed(lambda df=df: df.write.format("noop").mode("overwrite").save())
            reads[partitions] = seconds
        check = spark.read.format("servicebus").option("entity", "orders").load().count()
        assert check == n, check

        records = [{"body": f'{{"result": {i}}}'} for i in range(n)]
        report, base_write = timed(lambda: core.send("results", records, max_in_flight=16, connection=conn))
        assert report.ok
        frame = spark.createDataFrame([(r["body"],) for r in records], "body string").repartition(2).cache()
        frame.count()
        summary, spark_write = timed(lambda: sbspark.write(frame, "results", max_in_flight=16))
        assert summary.count("sent") == n
        spark.stop()
    finally:
        proc.terminate()

    print(f"\nread {n} messages (rows/s; ratio to core.scan in one process)")
    print(f"  core.scan, 1 process       {n / base_read:>9.0f}   1.00")
    for p, s in reads.items():
        print(f"  spark mode=peek, {p} part.  {n / s:>9.0f}   {base_read / s:.2f}")
    print(f"  speed-up 1 -> 2 partitions  {reads[1] / reads[2]:.2f}x")
    print(f"\nwrite {n} rows")
    print(f"  core.send, 1 process       {n / base_write:>9.0f}   1.00")
    print(f"  spark write, 2 partitions  {n / spark_write:>9.0f}   {base_write / spark_write:.2f}")


if __name__ == "__main__":
    main()
