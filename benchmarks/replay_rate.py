"""Replay at a rate (issue 62): ``%sb_resubmit orders --rate 200/s --yes`` of 2,000 dead letters, read
from the broker.

Against ``sbnotebook emulator --port 0 --latency-ms L`` in its own process (the system clock), for
each latency: 2,000 messages sent to "orders" and dead-lettered, then moved back by the magic itself
in an IPython shell (``%sb_connect``, ``%sb_resubmit``), first without a rate (the baseline, same
run), then at ``--rate``. The figures come from the broker: the copies' enqueued times, counted per
second of the run (the first copy at 0 s), and the span from the first copy to the last; the cell's
wall time beside them. After each run every message is in the queue exactly once (none lost, none
moved twice).

Targets (issue 62, Done when): at 200/s the run takes 10 s within 10 %, and no second of it holds
more than 1.2x the rate.

    python benchmarks/replay_rate.py [--messages 2000] [--rate 200/s] [--latency-ms 0 80]
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import sys
import time
from collections import Counter
from typing import Any

from _common import start_emulator  # the one way the benchmarks start `sbnotebook emulator`
from azure.servicebus import ServiceBusClient

from sbnotebook import core

QUEUE = "orders"
DLQ = f"{QUEUE}/$deadletterqueue"


def dead_letters(cs: str, n: int) -> None:
    core.send(QUEUE, [{"body": f"{i:05d}", "message_id": f"m-{i}"} for i in range(n)], connection=cs)
    while core.counts(QUEUE, connection=cs).active:
        with core.receive(QUEUE, max_messages=250, connection=cs) as batch:
            batch.dead_letter(reason="benchmark").raise_for_failures()


def enqueued(cs: str) -> tuple[list[dt.datetime], Counter[str]]:
    """The queue's messages through the SDK, not the kit: their enqueued times (the broker's stamps),
    and each body counted (peeked, nothing locked)."""
    times: list[dt.datetime] = []
    bodies: Counter[str] = Counter()
    with ServiceBusClient.from_connection_string(cs) as client, client.get_queue_receiver(QUEUE) as r:
        after = 0
        while page := r.peek_messages(max_message_count=250, sequence_number=after):
            for m in page:
                times.append(m.enqueued_time_utc)
                bodies[str(m)] += 1
            after = page[-1].sequence_number + 1
    return times, bodies


def per_second(times: list[dt.datetime]) -> list[int]:
    start = min(times)
    seconds = Counter(math.floor((t - start).total_seconds()) for t in times)
    return [seconds.get(s, 0) for s in range(max(seconds) + 1)]


def one_run(ip: Any, cs: str, n: int, rate: str | None) -> dict[str, Any]:
    dead_letters(cs, n)
    started = time.perf_counter()
    report = ip.run_line_magic("sb_resubmit", f"{QUEUE} --yes" + (f" --rate {rate}" if rate else ""))
    wall = time.perf_counter() - started
    times, bodies = enqueued(cs)
    assert report.ok and report.count("resubmitted") == n, report
    assert bodies == Counter(f"{i:05d}" for i in range(n)), "a message lost or moved twice"
    core.purge(QUEUE, connection=cs)
    counts = per_second(times)
    return {"span": (max(times) - min(times)).total_seconds(), "wall": wall, "seconds": counts, "peak": max(counts)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rate", default="200/s")
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 80.0])
    args = parser.parse_args()
    per = core.parse_rate(args.rate) or 0.0
    expected = args.messages / per
    from IPython.core.interactiveshell import InteractiveShell

    from sbnotebook.notebook import load_ipython_extension

    ip = InteractiveShell.instance()
    load_ipython_extension(ip)
    met = True
    for latency in args.latency_ms:
        proc, cs = start_emulator(latency)
        try:
            ip.run_line_magic("sb_connect", f'"{cs}"')
            base = one_run(ip, cs, args.messages, None)
            paced = one_run(ip, cs, args.messages, args.rate)
        finally:
            core.close_all()
            proc.terminate()
            proc.wait()
        within = abs(paced["span"] - expected) <= 0.1 * expected
        steady = paced["peak"] <= 1.2 * per
        met = met and within and steady
        print(f"\nlatency {latency:g} ms, {args.messages} messages")
        print(f"  no rate:  span {base['span']:.2f} s (cell {base['wall']:.2f} s), peak second {base['peak']}")
        print(
            f"  {args.rate}: span {paced['span']:.2f} s (cell {paced['wall']:.2f} s) against {expected:g} s"
            f" ({paced['span'] / expected:.3f}x: {'met' if within else 'MISSED'}); peak second {paced['peak']}"
            f" = {paced['peak'] / per:.2f}x the rate ({'met' if steady else 'MISSED'})"
        )
        print(f"  per second: {paced['seconds']}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
