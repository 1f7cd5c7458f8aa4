"""Live tail latency (issue 40): how long after it arrived a message shows in ``core.tail``.

Against ``sbnotebook emulator --port 0 --latency-ms 80`` in its own process, a tail polls "orders"
every ``--interval`` seconds on a thread; a producer on the main thread sends ``--messages`` single
messages at random moments (so they land at every phase of the poll cycle), each awaited: it has
arrived when its send is confirmed (the broker accepted it half a round trip before that). The
latency of a message is the time from that confirmation to the moment the tail handed it out.
After it, the broker state: every message still active (administration API) with no delivery
counted (peeks only; tests/core/operations/test_tail.py checks locks and credit in the broker itself).

Target: each message shows within the poll interval + 1 round trip of arriving.

    python benchmarks/tail_latency.py [--latency-ms 80] [--interval 1] [--messages 30]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time

from _common import start_emulator  # the one way the benchmarks start `sbnotebook emulator`

from sbnotebook import core

QUEUE = "orders"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=float, default=80.0)
    parser.add_argument("--interval", type=float, default=core.TAIL_INTERVAL)
    parser.add_argument("--messages", type=int, default=30)
    args = parser.parse_args()
    proc, cs = start_emulator(args.latency_ms)
    try:
        conn = core.connect(cs)
        core.send(QUEUE, ["there before"], connection=conn).raise_for_failures()  # links open, not shown
        sent: dict[str, float] = {}
        shown: dict[str, float] = {}
        tail = core.tail(QUEUE, interval=args.interval, connection=conn)

        def watch() -> None:
            for records in tail:
                now = time.perf_counter()
                for r in records:
                    shown[r["body_text"]] = now

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        rng = random.Random(40)
        for i in range(args.messages):
            time.sleep(rng.uniform(0.1, 1.5 * args.interval))
            core.send(QUEUE, [f"m{i}"], connection=conn).raise_for_failures()
            sent[f"m{i}"] = time.perf_counter()
        deadline = time.perf_counter() + 2 * args.interval + 1
        while len(shown) < len(sent) and time.perf_counter() < deadline:
            time.sleep(0.05)
        tail.stop()
        watcher.join()
        counts = core.counts(QUEUE, connection=conn)
        peeked = core.peek(QUEUE, max_messages=args.messages + 1, connection=conn).records
    finally:
        core.close_all()
        proc.terminate()
        proc.wait(timeout=30)
    missing = sorted(set(sent) - set(shown))
    latencies = sorted(shown[k] - sent[k] for k in sent if k in shown)
    target = args.interval + args.latency_ms / 1000
    print(f"tail of {QUEUE} at {args.latency_ms:g} ms, polling every {args.interval:g} s, {len(sent)} messages")
    print(f"  polls: {tail.polls}, messages seen: {tail.seen} ({len(missing)} never shown: {missing})")
    print(
        f"  latency from the confirmed send: median {statistics.median(latencies) * 1000:.0f} ms, "
        f"max {latencies[-1] * 1000:.0f} ms, min {latencies[0] * 1000:.0f} ms"
    )
    ok = not missing and latencies[-1] <= target
    verdict = "met" if ok else "MISSED"
    print(f"  target: every message within {target * 1000:.0f} ms (interval + 1 round trip): {verdict}")
    untouched = counts.active == args.messages + 1 and all(r["delivery_count"] == 0 for r in peeked)
    print(
        f"  broker after: {counts.active} active of {args.messages + 1}, delivery counts "
        f"{sorted({r['delivery_count'] for r in peeked})}: {'untouched' if untouched else 'CHANGED'}"
    )
    return 0 if ok and untouched else 1


if __name__ == "__main__":
    sys.exit(main())
