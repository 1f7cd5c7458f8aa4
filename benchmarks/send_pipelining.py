"""Settled, pipelined sends against the emulator's simulated distance.

Service Bus's documentation models a 70 ms round trip plus about 10 ms to accept and store a
message; the emulator runs with ``--latency-ms 80``. Compared, in the same run:

  (a) the plain SDK loop that awaits each send          (the baseline)
  (b) the kit with max_in_flight=10 and one_per_send    (target: >= 0.8 of 10 / round trip)
  (c) the kit's defaults (as many per send as fit)       (speed-up over (a))
  memory: peak traced allocation while streaming 30,000 and 100,000 messages from a generator
  (bounded: the 100k peak must not grow with the input)
  completion: completing locked messages one by one (SDK loop) vs the kit's pipelined settlement

    python benchmarks/send_pipelining.py [--latency-ms 80]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc

from _common import start_emulator  # the one way the benchmarks start `sbnotebook emulator`
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core


def plain_loop(conn: str, n: int) -> float:
    with ServiceBusClient.from_connection_string(conn) as c, c.get_queue_sender("results") as s:
        s.send_messages(ServiceBusMessage("warm-up"))
        t0 = time.perf_counter()
        for i in range(n):
            s.send_messages(ServiceBusMessage(f"plain-{i}"))
        return n / (time.perf_counter() - t0)


def kit(conn: str, n: int, *, one_per_send: bool) -> core.Report:
    report = core.send(
        "results", (f"kit-{i}" for i in range(n)), one_per_send=one_per_send, max_in_flight=10, connection=conn
    )
    report.raise_for_failures()
    return report


def peak_memory(conn: str, n: int) -> float:
    def generate():  # type: ignore[no-untyped-def]
        for i in range(n):
            yield {"body": f"streamed-{i}", "application_properties": {"i": i}}

    tracemalloc.start()
    tracemalloc.reset_peak()
    report = core.send("results", generate(), connection=conn)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    report.raise_for_failures()
    return peak / 1e6


def completion(conn: str, n: int) -> tuple[float, float]:
    core.purge("results", connection=conn)
    core.send("results", (f"c{i}" for i in range(2 * n)), connection=conn).raise_for_failures()
    with ServiceBusClient.from_connection_string(conn) as c, c.get_queue_receiver("results", max_wait_time=5) as r:
        got = []
        while len(got) < n:
            got += r.receive_messages(max_message_count=n - len(got), max_wait_time=5)
        t0 = time.perf_counter()
        for m in got:
            r.complete_message(m)
        plain = n / (time.perf_counter() - t0)
    with core.receive("results", max_messages=n, connection=conn) as batch:
        t0 = time.perf_counter()
        outcomes = batch.complete()
        piped = n / (time.perf_counter() - t0)
    assert outcomes.count("completed") == n, outcomes
    return plain, piped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=float, default=80.0)
    parser.add_argument("--plain", type=int, default=100, help="messages for the plain loop")
    parser.add_argument("--pipelined", type=int, default=3000, help="messages for (b)")
    args = parser.parse_args()
    proc, conn = start_emulator(args.latency_ms)
    rtt = args.latency_ms / 1000.0
    try:
        a = plain_loop(conn, args.plain)
        b = kit(conn, args.pipelined, one_per_send=True)
        c = kit(conn, 20_000, one_per_send=False)
        mem_small = peak_memory(conn, 30_000)
        mem_large = peak_memory(conn, 100_000)
        plain_done, piped_done = completion(conn, 200)
    finally:
        proc.terminate()
        proc.wait(10)
    limit = 10 / rtt
    b_ratio = b.rate / limit
    print(f"simulated round trip {args.latency_ms:.0f} ms (70 ms network + 10 ms store)")
    print(f"(a) plain SDK loop, one send awaited at a time   {a:9.1f} msg/s")
    print(
        f"(b) kit, max_in_flight=10, one_per_send          {b.rate:9.1f} msg/s = {b_ratio:.2f} of its limit "
        f"{limit:.0f} msg/s (target >= 0.80)"
    )
    print(f"(c) kit defaults (many per send)               {c.rate:9.1f} msg/s = {c.rate / a:.0f}x (a)")
    print(
        f"peak memory streaming 30,000 / 100,000 messages  {mem_small:.1f} MB / {mem_large:.1f} MB "
        f"(ratio {mem_large / mem_small:.2f}; bounded if about 1)"
    )
    print(
        f"completing 200 locked messages: SDK loop {plain_done:.1f} msg/s, kit pipelined {piped_done:.1f} msg/s "
        f"= {piped_done / plain_done:.1f}x"
    )
    ok = b_ratio >= 0.8 and mem_large / mem_small < 1.5
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
