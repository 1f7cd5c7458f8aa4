"""Interactive latency: the kit's live connection beside the SDK kept open, at 0 and 80 ms.

An analyst clicking through a queue pays each call's latency. The emulator's ``--latency-ms 80``
is what a notebook in one region sees from a namespace in another. In one run, for each latency,
against ``sbnotebook emulator --port 0`` in its own process:

  kit: core.connect(), then the first peek, then warm peek 10 / send 1 / counts / receive 1 +
       complete (medians of --repeat calls), on one live connection
  SDK: a ServiceBusClient with a receiver, a sender and an admin client kept open (the baseline)
  receivers of their own: receive-and-delete 1 (the kit keeps a drained receive-and-delete link),
       and receive 1 + complete from a session (a session receiver holds its session, so each
       call opens one), in the kit and with the SDK's own ``with client.get_queue_receiver(...)``
  scan: peeking --scan-messages messages through core.scan, and the ratio t(80 ms) / t(0 ms),
        with the peak memory the scan allocated (pages are consumed, not kept)
  cold paths (issue 31): core.connect() itself (the key checked, the warm-up left in the
        background), the first peek and the first send on an entity nothing has opened yet on a
        live connection in use (its spare AMQP connections open), the first peek on a brand-new
        live connection, a session receive + complete; each against its target, reported but not
        failing the run

  completion (issue 40): Tab on ``%sb_peek d`` in a real IPython shell's completer, with the
        entity-name cache cold (emptied) and warm
  copy (issue 40): %sb_copy's core.copy of --copy-messages messages between two emulators (both at
        the latency; at 0 and the far latency in one run), --copy-repeat times, each paired with
        core.export_jsonl + core.import_jsonl of the same messages just before it, and the peak
        traced allocation of the copy against that of holding one scanned page, its working memory
        (the peak less what its Report keeps) and the most source messages it held (report.stats)

Targets (issue 13): warm peek, send, counts <= 1.5 round trips; receive + complete <= 2.5; first
call after connect <= 6; scan t(80)/t(0) <= 1.5. Issue 40: completion <= 1 round trip cold, 0 warm
(reported in round trips, with the requests a cold Tab waited for). Issue 55 (restating issue 40's
1.2x, shown unreachable within one page): copy <= 1.6x export + import at the far latency; issue 63:
<= 1.1x, with at most max_held_bytes (core.MAX_HELD_BYTES) of source messages held.

    python benchmarks/interactive_latency.py [--repeat 15] [--scan-messages 20000] [--only completion,copy]
        [--copy-messages 5000] [--copy-repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

from _common import start_emulator  # the one way the benchmarks start `sbnotebook emulator`
from interactive.calls import QUEUE, cold, kit, scan, sdk
from interactive.completion import completion
from interactive.copying import copy_vs_files

from sbnotebook import core

COLD_TARGETS = {  # issue 31: round trips (+ fixed ms) at the far latency
    "first peek on an entity": (3.0, 50.0),
    "first send to an entity": (3.0, 50.0),
    "first peek on a new live connection": (6.0, 50.0),  # no target in the issue: SASL, open, token, attach, call
    "session receive 1 + complete": (4.0, 0.0),
    "connect": (4.0, 0.0),
}


def print_cold(results: dict[float, dict[str, Any]], far: float) -> None:
    print(f"\nCold paths (issue 31; reported, not failing the run): round trips at {far:.0f} ms\n")
    print(f"| call | kit 0 ms | kit {far:.0f} ms | target |")
    print("|---|---:|---:|---|")
    for call, (trips, extra) in COLD_TARGETS.items():
        where = "cold" if call in results[far]["cold"] else "kit"
        k0, kf = results[0.0][where][call], results[far][where][call]
        mark = "met" if kf <= trips * far + extra else "MISSED"
        plus = f" + {extra:.0f} ms" if extra else ""
        print(f"| {call} | {k0:,.0f} ms | {kf:,.0f} ms ({kf / far:.1f} RT) | <= {trips:.0f} RT{plus}: {mark} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--scan-messages", type=int, default=20_000)
    parser.add_argument("--latency-ms", type=float, default=80.0, help="the far case (the near one is 0)")
    parser.add_argument("--copy-messages", type=int, default=5_000)
    parser.add_argument("--copy-repeat", type=int, default=3, help="copies timed at each latency, each paired")
    parser.add_argument("--only", help="comma-separated: completion, copy (the issue 40 parts alone)")
    args = parser.parse_args()
    if args.only:
        sys.exit(issue_40(args, set(args.only.split(","))))
    results: dict[float, dict[str, Any]] = {}
    for latency in (0.0, args.latency_ms):
        proc, cs = start_emulator(latency)
        try:
            core.send(QUEUE, [f"m{i}" for i in range(200)], connection=cs)  # something to peek and receive
            core.close_all()
            results[latency] = {
                "kit": kit(cs, args.repeat),
                "cold": cold(cs, max(3, args.repeat // 3)),
                "sdk": sdk(cs, args.repeat),
                "scan": scan(cs, args.scan_messages),
            }
        finally:
            core.close_all()
            proc.terminate()
            proc.wait(10)

    far = args.latency_ms
    targets = {
        "first peek 10 after connect": 6.0,
        "peek 10": 1.5,
        "send 1": 1.5,
        "counts": 1.5,
        "receive 1 + complete": 2.5,
    }
    print(f"\nInteractive calls (medians of {args.repeat}); round trips = ms at {far:.0f} ms / {far:.0f}\n")
    print(f"| call | kit 0 ms | SDK kept open 0 ms | kit {far:.0f} ms | SDK kept open {far:.0f} ms | target |")
    print("|---|---|---|---|---|---|")
    failed = []
    for call, target in targets.items():
        k0 = results[0.0]["kit"][call]
        kf = results[far]["kit"][call]
        s0 = results[0.0]["sdk"].get(call)
        sf = results[far]["sdk"].get(call)
        trips = kf / far if far else float("nan")
        ok = trips <= target
        failed += [] if ok else [call]
        sdk0 = f"{s0:,.0f} ms" if s0 is not None else "-"
        sdkf = f"{sf:,.0f} ms ({sf / far:.1f} RT)" if sf is not None else "-"
        mark = "met" if ok else "MISSED"
        print(f"| {call} | {k0:,.0f} ms | {sdk0} | {kf:,.0f} ms ({trips:.1f} RT) | {sdkf} | <= {target} RT: {mark} |")
    c0, cf = results[0.0]["kit"]["connect"], results[far]["kit"]["connect"]
    print(f"| (connect, once) | {c0:,.0f} ms | - | {cf:,.0f} ms ({cf / far:.1f} RT) | - | - |")
    t0, n0, m0 = results[0.0]["scan"]
    tf, nf, mf = results[far]["scan"]
    ratio = tf / t0
    ok = ratio <= 1.5 and n0 == nf == args.scan_messages
    failed += [] if ok else ["scan"]
    print(
        f"\nScan of {args.scan_messages:,} messages: {t0:.2f} s at 0 ms, {tf:.2f} s at {far:.0f} ms "
        f"-> ratio {ratio:.2f} (target <= 1.5: {'met' if ok else 'MISSED'}); "
        f"peak allocation {max(m0, mf):.1f} MiB; messages seen {n0:,} / {nf:,}"
    )
    print(f"\nCalls that open a receiver of their own (medians of {args.repeat}; no target):\n")
    print(f"| call | kit 0 ms | SDK `with` block 0 ms | kit {far:.0f} ms | SDK `with` block {far:.0f} ms |")
    print("|---|---|---|---|---|")
    for call in ("receive-and-delete 1", "session receive 1 + complete"):
        k0, kf = results[0.0]["kit"][call], results[far]["kit"][call]
        s0, sf = results[0.0]["sdk"][call], results[far]["sdk"][call]
        print(
            f"| {call} | {k0:,.0f} ms | {s0:,.0f} ms | {kf:,.0f} ms ({kf / far:.1f} RT) "
            f"| {sf:,.0f} ms ({sf / far:.1f} RT) |"
        )
    print_cold(results, far)
    failed += ["issue 40"] if issue_40(args, {"completion", "copy"}) else []
    if failed:
        print("\nmissed:", ", ".join(failed))
        sys.exit(1)


def issue_40(args: argparse.Namespace, parts: set[str]) -> int:
    """Completion and copy at the far latency (emulators of their own); 1 if a target was missed."""
    import tempfile
    from pathlib import Path

    far = args.latency_ms
    missed = []
    if "completion" in parts:
        proc, cs = start_emulator(far)
        try:
            got = completion(cs, args.repeat)
        finally:
            core.close_all()
            proc.terminate()
            proc.wait(10)
        cold_ok = got["cold"] <= far + 25 and got["rounds"] == 1  # one round trip (two listings at once) + local
        warm_ok = got["warm"] <= 0.25 * far  # no round trip
        missed += [] if cold_ok and warm_ok else ["completion"]
        print(f"\nTab completion at {far:.0f} ms (medians of {got['repeat']}, a real IPython shell's completer):\n")
        print("| cache | ms | round trips | target |")
        print("|---|---:|---:|---|")
        print(
            f"| cold | {got['cold']:.0f} | {got['cold'] / far:.2f} | <= 1 RT + 25 ms: {'met' if cold_ok else 'MISSED'} "
            f"(names offered on {got['cold named']} of {got['repeat']} cold Tabs; requests waited for: "
            f"{got['requests']} at once, {got['rounds']} round; local {got['local']:.1f} ms: the Tab less its "
            "slowest request) |"
        )
        print(f"| warm | {got['warm']:.1f} | {got['warm'] / far:.2f} | 0 RT: {'met' if warm_ok else 'MISSED'} |")
    if "copy" in parts:
        n = args.copy_messages
        for latency in (0.0, far):  # paired in one run: the same machine load for both
            a, cs = start_emulator(latency)
            b, target_cs = start_emulator(latency)
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    got = copy_vs_files(cs, target_cs, n, Path(tmp), args.copy_repeat)
            finally:
                core.close_all()
                for proc in (a, b):
                    proc.terminate()
                    proc.wait(10)
            pairs = [c / (e + i) for c, e, i in zip(got["copy"], got["export"], got["import"], strict=True)]
            ratio = statistics.median(pairs)
            working = got["copy working MiB"] / got["one page MiB"]
            held = max(got["held"])
            held_ok = max(got["held bytes"]) <= core.MAX_HELD_BYTES  # issue 63: a bound in bytes
            if latency:
                missed += [] if ratio <= 1.1 and held_ok else ["copy"]
            med = {k: statistics.median(got[k]) for k in ("copy", "export", "import")}
            print(f"\n%sb_copy of {n:,} messages of ~1 KB, two emulators at {latency:.0f} ms, {len(pairs)} pairs:\n")
            print(
                f"copy {med['copy']:.2f} s ({n / med['copy']:,.0f} msg/s; "
                f"{min(got['copy']):.2f}-{max(got['copy']):.2f}); "
                f"export {med['export']:.2f} s + import {med['import']:.2f} s; ratio median {ratio:.2f} "
                f"({min(pairs):.2f}-{max(pairs):.2f}; target <= 1.1 at {far:.0f} ms: "
                f"{'met' if ratio <= 1.1 else 'MISSED'}); "
                f"copy's peak traced allocation {got['copy peak MiB']:.1f} MiB, "
                f"of which the Report keeps {got['copy report MiB']:.1f} MiB; working memory (the peak less what "
                f"the Report keeps) {got['copy working MiB']:.1f} MiB = {working:.1f}x one scanned page "
                f"({got['one page MiB']:.1f} MiB); at most {held:.0f} source messages in memory, "
                f"{max(got['held bytes']) / 2**20:.1f} MiB encoded (target <= max_held_bytes, "
                f"{core.MAX_HELD_BYTES / 2**20:.0f} MiB: {'met' if held_ok else 'MISSED'}); an import's peak "
                f"{got['import peak MiB']:.1f} MiB"
            )
            each = zip(got["copy"], got["export"], got["import"], strict=True)
            print("pairs (copy / export + import, s):", "; ".join(f"{c:.2f} / {e:.2f} + {i:.2f}" for c, e, i in each))
    return 1 if missed else 0


if __name__ == "__main__":
    main()
