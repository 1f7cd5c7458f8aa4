"""The send benchmark and a peek's latency, once, for comparing two commits of the kit and its
emulator (issue 60: what the broker's journey costs). It imports ``sbnotebook`` from wherever
``PYTHONPATH`` points, and starts that tree's ``sbnotebook emulator`` in its own process at the given
latency; it prints one line of JSON: the send's rate (``core.send`` of N small messages, the kit's
defaults, ``max_in_flight=10``, after 1,000 to warm up), the emulator's CPU time per message during
that send (``broker_us``: what the broker's own work costs, the journey's notes included), and the
median of 50 peeks of 10 messages.

    git archive 5eca7c3 | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base python benchmarks/send_and_peek.py      # and again with PYTHONPATH=. ; alternate
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import psutil
from _common import cpu_seconds, start_emulator  # the one way the benchmarks start `sbnotebook emulator`

QUEUE = "results"
PEEKS = 50


def measure(conn_str: str, n: int, broker: psutil.Process) -> dict[str, float]:
    from sbnotebook import core

    conn = core.connect(conn_str)
    core.send(QUEUE, (f"warm-{i}" for i in range(1000)), max_in_flight=10, connection=conn).raise_for_failures()
    started, broker_started = time.perf_counter(), cpu_seconds(broker)
    core.send(QUEUE, (f"m-{i}" for i in range(n)), max_in_flight=10, connection=conn).raise_for_failures()
    rate = n / (time.perf_counter() - started)
    broker_us = (cpu_seconds(broker) - broker_started) / n * 1e6
    latencies = []
    for _ in range(PEEKS):
        t0 = time.perf_counter()
        core.peek(QUEUE, max_messages=10, connection=conn)
        latencies.append(time.perf_counter() - t0)
    core.close_all()
    return {"rate": rate, "broker_us": broker_us, "peek_ms": statistics.median(latencies) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--messages", type=int, default=20_000)
    args = parser.parse_args()
    proc, conn = start_emulator(args.latency_ms)
    try:
        print(json.dumps(measure(conn, args.messages, psutil.Process(proc.pid))))
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
