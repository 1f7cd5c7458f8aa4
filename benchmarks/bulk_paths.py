"""The bulk paths at the limit (issue 63): purge, copy memory and the first call, each as a ratio
against a baseline measured in the same run.

  purge   : ``core.purge`` of ``--messages`` (10^6) active messages of 1 KB, the emulator in its own
            process at each ``--latency-ms`` (0 and 80), its queue filled untimed straight through its
            broker (a fill through AMQP takes ~100 s at 10^6); the purge's time, its batch-delete
            requests, the kernel's peak RSS (sampled every 50 ms), the emulator's CPU seconds, what is
            left, and the Report's count against the broker's
  copy    : ``core.copy`` (the default ``max_held_bytes``) of ``--copy-sizes`` messages of 64 KB
            between two emulators at 0 ms, each size in a fresh process, the source filled the same
            way: the kernel's RSS before and at its peak, the most bytes the copy held
            (``peak_held_bytes``)
  peek    : ``core.scan`` of ``--peek-sizes`` (2 * 10^4 and 10^5) messages of 1 KB, filled the same
            way, once to open its links, then timed ``--repeat`` times, at each latency: the ratio of
            the medians, the far latency's over 0 ms
  first   : ``core.connect()`` then a peek of 10 in a fresh process (imports done before the clock
            starts), ``--repeat`` times at each latency: round trips (time over the latency)
  resubmit: ``core.resubmit`` (its defaults) of ``--resubmit-messages`` messages of 1 KB from a queue
            filled the same way to another, ``--repeat`` times at each latency, each on a fresh
            emulator: its messages a second, and its rate over the in-flight limit (``max_in_flight``
            batches of ``batch_size`` per the tree's round trips a batch: benchmarks/scale.py's
            figure), the kernel's and the emulator's CPU per message

``--trees A B``: run each part with each tree's ``sbnotebook`` in turn (A B A B ..., ``--rounds``
times), so a change is measured beside the code before it (``git archive main | tar -x -C /tmp/base``).

    python benchmarks/bulk_paths.py [--parts purge copy peek first] [--messages 1000000]
        [--resubmit-messages 20000] [--latency-ms 0 80] [--rounds 1] [--trees /tmp/base .]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BODY_1KB = 1000


def filled_emulator(n: int, latency_ms: float, size: int) -> subprocess.Popen[str]:
    """An emulator process (this tree's) whose queue ``orders`` holds ``n`` messages of ``size``
    letters, put straight into its broker; its connection string is its first line."""
    code = f"""
import gc, struct, sys
from sbnotebook.emulator.server import Emulator
from sbnotebook.emulator.broker.model import MessageData
em = Emulator(latency_ms={latency_ms}).start()
body = b"\\x00Sw\\xb1" + struct.pack(">I", {size}) + b"x" * {size}  # an amqp-value string section
for i in range(0, {n}, 1000):
    em.broker.send("orders", [MessageData(raw_properties=b"", raw_body=body, size=len(body) + 100)
                              for _ in range(min(1000, {n} - i))])
gc.freeze(); gc.set_threshold(20_000, 20, 20)  # as the command line's emulator
print(em.connection_string, flush=True)
sys.stdin.read()
"""
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


class PeakRss:
    """The peak RSS of this process while the block runs (sampled every 20 ms)."""

    def __enter__(self) -> PeakRss:
        import psutil

        self.me = psutil.Process()
        self.before = self.peak = self.me.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.me.memory_info().rss)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def purge_once(n: int, latency_ms: float) -> dict[str, Any]:
    import psutil

    from sbnotebook import core

    proc = filled_emulator(n, latency_ms, BODY_1KB)
    assert proc.stdout is not None and proc.stdin is not None
    cs = proc.stdout.readline().strip()
    try:
        emulator = psutil.Process(proc.pid)
        cpu = sum(emulator.cpu_times()[:2])
        with PeakRss() as rss:
            started = time.perf_counter()
            report = core.purge("orders", connection=cs)
            elapsed = time.perf_counter() - started
        left = core.counts("orders", connection=cs).active
        return {
            "seconds": elapsed,
            "purged": report.count("purged"),
            "left": left,
            "requests": report.stats.get("batch_delete_requests"),
            "kernel peak MiB": rss.peak / 2**20,
            "emulator CPU s": sum(emulator.cpu_times()[:2]) - cpu,
        }
    finally:
        core.close_all()
        proc.stdin.close()
        proc.wait()


def copy_once(n: int, size: int) -> dict[str, Any]:
    from _common import start_emulator

    from sbnotebook import core

    proc = filled_emulator(n, 0.0, size)
    target, target_cs = start_emulator(0.0)
    assert proc.stdout is not None and proc.stdin is not None
    cs = proc.stdout.readline().strip()
    try:
        src, dst = core.connect(cs, warm=False), core.connect(target_cs, warm=False)
        core.peek("orders", max_messages=1, connection=src)  # both connections open before the baseline
        core.counts("results", connection=dst)
        with PeakRss() as rss:
            started = time.perf_counter()
            report = core.copy("orders", "results", resume=False, source_connection=src, connection=dst)
            elapsed = time.perf_counter() - started
        assert report.ok and report.count("sent") == n, report
        return {
            "seconds": elapsed,
            "rss before MiB": rss.before / 2**20,
            "rss peak MiB": rss.peak / 2**20,
            "peak held MiB": report.stats.get("peak_held_bytes", 0) / 2**20,
            "peak held": report.stats["peak_held"],
        }
    finally:
        core.close_all()
        proc.stdin.close()
        proc.wait()
        target.terminate()
        target.wait()


FIRST_CALL = """
import json, sys, time
from sbnotebook import core
import azure.servicebus.aio, azure.servicebus._pyamqp.aio  # imports done before the clock starts
started = time.perf_counter()
live = core.connect(sys.argv[1])
connected = time.perf_counter()
core.peek("orders", max_messages=10, connection=live)
print(json.dumps({"connect": connected - started, "total": time.perf_counter() - started}))
live.close()
"""


def first_calls(latency_ms: float, repeat: int) -> dict[str, Any]:
    from _common import start_emulator

    from sbnotebook import core

    proc, cs = start_emulator(latency_ms)
    try:
        core.send("orders", [f"m{i}" for i in range(20)], connection=cs).raise_for_failures()
        core.close_all()
        rows = []
        for _ in range(repeat):
            out = subprocess.run([sys.executable, "-c", FIRST_CALL, cs], capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        return {k: sorted(r[k] for r in rows) for k in ("connect", "total")}
    finally:
        proc.terminate()
        proc.wait()


def scans(n: int, latency_ms: float, repeat: int) -> list[float]:
    from sbnotebook import core

    proc = filled_emulator(n, latency_ms, BODY_1KB)
    assert proc.stdout is not None and proc.stdin is not None
    cs = proc.stdout.readline().strip()
    try:
        live = core.connect(cs, warm=False)
        assert sum(len(page) for page in core.scan("orders", connection=live)) == n  # its links open
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            assert sum(len(page) for page in core.scan("orders", connection=live)) == n
            times.append(time.perf_counter() - started)
        return sorted(times)
    finally:
        core.close_all()
        proc.stdin.close()
        proc.wait()


def resubmit_once(n: int, latency_ms: float) -> dict[str, Any]:
    import psutil

    from sbnotebook import core
    from sbnotebook.core.incidents.resubmit.api import BATCH_SIZE

    proc = filled_emulator(n, latency_ms, BODY_1KB)
    assert proc.stdout is not None and proc.stdin is not None
    cs = proc.stdout.readline().strip()
    try:
        live = core.connect(cs, warm=False)
        core.peek("orders", max_messages=1, connection=live)  # connected before the clock starts
        core.counts("results", connection=live)
        me, emulator = psutil.Process(), psutil.Process(proc.pid)
        cpu, emulator_cpu = sum(me.cpu_times()[:2]), sum(emulator.cpu_times()[:2])
        started = time.perf_counter()
        report = core.resubmit("orders", target="results", connection=live)
        elapsed = time.perf_counter() - started
        assert report.ok and report.count("resubmitted") == n, report
        ceiling = core.MAX_IN_FLIGHT * BATCH_SIZE / (round_trips_a_batch() * latency_ms / 1000) if latency_ms else None
        return {
            "seconds": elapsed,
            "messages a second": report.rate,
            "of in-flight limit": None if ceiling is None else report.rate / ceiling,
            "kernel CPU us per message": (sum(me.cpu_times()[:2]) - cpu) / n * 1e6,
            "emulator CPU us per message": (sum(emulator.cpu_times()[:2]) - emulator_cpu) / n * 1e6,
        }
    finally:
        core.close_all()
        proc.stdin.close()
        proc.wait()


def round_trips_a_batch() -> int:
    """The tree's round trips a resubmit batch costs: a tree from before they were named received,
    sent and completed one after the other (three)."""
    from sbnotebook.core.incidents.resubmit import workers as resubmit_batches

    return int(getattr(resubmit_batches, "ROUND_TRIPS_A_BATCH", 3))


def child(args: argparse.Namespace) -> None:
    """One part in this process (the tree given by PYTHONPATH): its figures as one JSON line."""
    got: dict[str, Any] = {}
    if args.child == "purge":
        got = {str(ms): purge_once(args.messages, ms) for ms in args.latency_ms}
    elif args.child == "copy":
        got = {str(n): copy_once(n, 65536) for n in args.copy_sizes}
    elif args.child == "peek":
        got = {str(n): {str(ms): scans(n, ms, args.repeat) for ms in args.latency_ms} for n in args.peek_sizes}
    elif args.child == "resubmit":
        got = {
            str(ms): [resubmit_once(args.resubmit_messages, ms) for _ in range(args.repeat)] for ms in args.latency_ms
        }
    elif args.child == "first":
        got = {str(ms): first_calls(ms, args.repeat) for ms in args.latency_ms if ms}
    print(json.dumps(got), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", default=["purge", "copy", "peek", "first"])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--copy-sizes", type=int, nargs="+", default=[2_000, 10_000, 20_000])
    parser.add_argument("--peek-sizes", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--resubmit-messages", type=int, default=20_000)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 80.0])
    parser.add_argument("--repeat", type=int, default=5, help="first calls, scans, resubmits at each latency")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--trees", nargs="+", default=["."], help="sbnotebook trees, run in turn")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    for part in args.parts:
        # The copy's sizes each in a fresh process: RSS does not shrink, so a size would carry the last's.
        sizes = [[n] for n in args.copy_sizes] if part == "copy" else [args.copy_sizes]
        for round_ in range(1, args.rounds + 1):
            for tree in args.trees:
                for copy_sizes in sizes:
                    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
                    flags = ["--messages", str(args.messages), "--repeat", str(args.repeat), "--latency-ms"]
                    flags += [str(ms) for ms in args.latency_ms] + ["--copy-sizes", *map(str, copy_sizes)]
                    flags += ["--peek-sizes", *map(str, args.peek_sizes)]
                    flags += ["--resubmit-messages", str(args.resubmit_messages)]
                    out = subprocess.run(
                        [sys.executable, str(Path(__file__).resolve()), "--child", part, *flags],
                        env=env, capture_output=True, text=True, check=True, cwd=HERE,
                    )  # fmt: skip
                    print(f"{part} round {round_} tree {tree}: {out.stdout.strip().splitlines()[-1]}", flush=True)


if __name__ == "__main__":
    main()
