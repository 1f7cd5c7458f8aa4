"""How cost and memory grow with the number of messages: 10^4, 10^5 (and 10^6 with ``--million``).

For each size and latency (``--latency-ms``, default 0 and 80), in a fresh Python process of its own
(the kernel's side: what a smaller size left behind is not counted in a larger one's RSS) against a
fresh emulator in another (so its memory is measured apart), the steps of ``STEPS`` run in order on
1 KB messages, each timed, with the peak RSS of the kernel's process and of the emulator sampled
while it runs, and the CPU seconds each used:

  fill            core.send of N messages
  counts          core.counts, 20 times (time per call: must not grow with N)
  scan            core.scan of the whole queue (pages of peeked messages, nothing kept)
  export          core.export_jsonl of the whole queue to a file
  spark read      spark.read.format("servicebus"), 4 partitions, every row read (``--spark``)
  stop            stop the emulator (SIGTERM) until it exits: it compacts its journal then
  restart         start it on its data directory, until the queue answers
                  (``--data-dir``: then every step runs against a durable emulator)
  resubmit        core.resubmit of a dead-letter queue of N messages (they expired into it) to
                  another queue; at a latency, its rate against the in-flight limit over round
                  trips: max_in_flight batches of batch_size, ROUND_TRIPS_A_BATCH each
                  (core/incidents/resubmit/workers.py: the copies sent, then the originals
                  completed, the next batch's receive beside them)
  purge (batch)   core.purge: batch-delete-messages on the server
  triage open     the dead-letter triage panel opening on a DLQ of N messages (per call, warm: the
                  runtime counts and one peeked page, whatever N); the DLQ is filled first, not
                  timed (messages sent with a 1 s time to live to a queue that dead-letters them)
  triage grouping core.group_counts of that DLQ: every message counted by reason, description,
                  subject and signature over the scanner, nothing kept but the counters
  grouping by reason / grouping by signature
                  core.group_counts(by=["dead_letter_reason"]) and by=["signature"] of N messages
                  whose dead-letter descriptions differ in every message (ids, numbers, GUIDs,
                  times, URLs; three templates): the cost of masking, per message, against counting
                  by the reason alone. Filled first, not timed; the messages carry the
                  DeadLetterReason / DeadLetterErrorDescription properties as a dead-letter queue
                  delivers them (dead-lettering 10^5 messages one by one with their own descriptions
                  would take an hour at 80 ms; expiry writes one fixed description)
  purge (receive) core.purge of a partitioned queue, where Service Bus refuses batch delete, so
                  the kit receives (the fallback path); filled first, the fill not timed

Targets (issue 31): time per message at 10^6 within 1.2x of 10^5, and the kernel's peak RSS; purge
of 10^6 active messages at 80 ms under 20 s; resubmit at 80 ms at >= 0.8 of the in-flight limit.
Issue 40: grouping by signature within 1.2x per message of grouping by reason.
Adding a measurement is adding a ``Step`` to ``STEPS`` (a name, a function of the ``Run``, what it
needs first).

    python benchmarks/scale.py [--sizes 10000 100000] [--million] [--latency-ms 0 80] [--spark] [--data-dir]
                               [--steps fill counts scan export "purge (batch)"]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from _common import cpu_seconds
from scaling.dead_letters import (
    fill_dead_letters,
    fill_dlq,
    fill_dlq_and_open,
    fill_signed,
    grouping_by_reason,
    grouping_by_signature,
    resubmit,
    triage_grouping,
    triage_open,
)
from scaling.process import EmulatorProcess, Peak
from scaling.steps import (
    PARTITIONED,
    QUEUE,
    TOPOLOGY,
    Run,
    Step,
    counts,
    export,
    fill,
    purge_batch,
    purge_receive,
    restart,
    scan,
    spark_read,
    stop,
)

from sbnotebook import core

PURGE_TARGET_S = 20.0
GROWTH_TARGET = 1.2
RESUBMIT_TARGET = 0.8  # of the in-flight limit over round trips
SIGNATURE_TARGET = 1.2  # grouping by signature against by reason, per message
MiB = 1024 * 1024

STEPS: list[Step] = [
    Step("fill", fill),
    Step("counts", counts, per_call=True),
    Step("scan", scan),
    Step("export", export),
    Step("resubmit", resubmit),
    Step("spark read (4 partitions)", spark_read, needs_spark=True),
    Step("stop", stop, needs_data_dir=True),
    Step("restart", restart, needs_data_dir=True),
    Step("purge (batch delete)", purge_batch),
    Step("triage open", triage_open, per_call=True),
    Step("triage grouping", triage_grouping),
    Step("grouping by reason", grouping_by_reason),
    Step("grouping by signature", grouping_by_signature),
    Step("purge (receive path)", purge_receive),
]
SETUP: dict[str, Callable[[Run], int]] = {
    "purge (receive path)": lambda run: fill(run, PARTITIONED),
    "resubmit": fill_dead_letters,
    "triage open": fill_dlq_and_open,
    "triage grouping": fill_dlq,
    "grouping by reason": fill_signed,
    "grouping by signature": fill_signed,
}


def measure(n: int, latency_ms: float, steps: list[Step], spark: Any, durable: bool) -> list[dict[str, Any]]:
    me = psutil.Process(os.getpid())
    with tempfile.TemporaryDirectory() as tmp:
        emu = EmulatorProcess(latency_ms, Path(tmp), durable, TOPOLOGY)
        emu.start()
        try:
            run = Run(n, latency_ms, emu.conn, Path(tmp), spark, emulator_process=emu)
            base = emu.process.memory_info().rss
            core.counts(QUEUE, connection=run.conn)  # connected (and warm) before the first timed step
            for step in steps:
                if step.name in SETUP:
                    SETUP[step.name](run)
                kernel_before, emulator_before = cpu_seconds(me), emu.cpu()
                with Peak(lambda: me) as kernel, Peak(lambda: emu.process) as broker:
                    t0 = time.perf_counter()
                    handled = step.work(run)
                    elapsed = time.perf_counter() - t0
                kernel_cpu, emulator_cpu = cpu_seconds(me) - kernel_before, emu.cpu_since(emulator_before)
                row = {
                    "size": n,
                    "latency_ms": latency_ms,
                    "step": step.name,
                    "seconds": round(elapsed, 3),
                    ("ms per call" if step.per_call else "us per message"): round(
                        elapsed / handled * (1e3 if step.per_call else 1e6), 2
                    ),
                    "kernel peak MiB": round(kernel.peak / MiB, 1),
                    "emulator peak MiB": round(broker.peak / MiB, 1),
                    # Of the step's seconds, how many each process spent on a CPU: one near the
                    # step's time is CPU-bound (each side runs its messages on one thread).
                    "kernel CPU s": round(kernel_cpu, 1),
                    "emulator CPU s": None if emulator_cpu is None else round(emulator_cpu, 1),
                }
                row.update(run.extra)
                run.extra.clear()
                if step.name == "fill":
                    row["emulator bytes per message"] = round((emu.process.memory_info().rss - base) / n)
                print(json.dumps(row), flush=True)
                run.rows.append(row)
            return run.rows
        finally:
            emu.stop()


def measure_here(
    sizes: list[int], latencies: list[float], steps: list[Step], spark: bool, durable: bool
) -> list[dict[str, Any]]:
    session = None
    if spark:
        from sbnotebook import spark as sbspark

        session = sbspark.local_session("sbnotebook-scale")
    rows: list[dict[str, Any]] = []
    try:
        for latency in latencies:
            for n in sizes:
                rows += measure(n, latency, steps, session, durable)
    finally:
        if session is not None:
            session.stop()
    return rows


def measure_apart(n: int, latency: float, steps: list[Step], args: argparse.Namespace) -> list[dict[str, Any]]:
    """One size at one latency in a child process (this script, for that size only): its peak RSS
    starts from a fresh interpreter, as a kernel that runs one bulk job does."""
    command = [sys.executable, __file__, "--sizes", str(n), "--latency-ms", str(latency)]
    command += ["--steps", *(s.name for s in steps)]
    command += ["--spark"] * args.spark + ["--data-dir"] * args.data_dir
    rows = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith("{"):
                print(line, end="", flush=True)
                rows.append(json.loads(line))
    if child.returncode:
        raise SystemExit(f"size {n} at {latency:g} ms failed (exit status {child.returncode})")
    return rows


def verdicts(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    by = {(r["size"], r["latency_ms"], r["step"]): r for r in rows}
    for (size, latency, step), row in by.items():
        if size >= 1_000_000 and (100_000, latency, step) in by and "us per message" in row:
            ratio = row["us per message"] / by[(100_000, latency, step)]["us per message"]
            ok = "ok" if ratio <= GROWTH_TARGET else "MISSED"
            out.append(
                f"{step} at {latency:g} ms: 10^6 vs 10^5 per message {ratio:.2f}x ({ok}, target {GROWTH_TARGET})"
            )
        if size >= 1_000_000 and (100_000, latency, step) in by:
            ratio = row["kernel peak MiB"] / by[(100_000, latency, step)]["kernel peak MiB"]
            ok = "ok" if ratio <= GROWTH_TARGET else "MISSED"
            out.append(
                f"{step} at {latency:g} ms: kernel peak RSS 10^6 vs 10^5 {ratio:.2f}x ({ok}, target {GROWTH_TARGET})"
            )
        if step == "resubmit" and "of in-flight limit" in row:
            ratio = row["of in-flight limit"]
            ok = "ok" if ratio >= RESUBMIT_TARGET else "MISSED"
            out.append(
                f"resubmit of {size} at {latency:g} ms: {ratio:.2f} of the in-flight limit over round trips"
                f" ({ok}, target >= {RESUBMIT_TARGET})"
            )
        if step == "grouping by signature" and (size, latency, "grouping by reason") in by:
            ratio = row["us per message"] / by[(size, latency, "grouping by reason")]["us per message"]
            ok = "ok" if ratio <= SIGNATURE_TARGET else "MISSED"
            out.append(
                f"grouping of {size} at {latency:g} ms: by signature vs by reason per message {ratio:.2f}x"
                f" ({ok}, target {SIGNATURE_TARGET})"
            )
        if size >= 1_000_000 and step == "purge (batch delete)" and latency >= 80:
            ok = "ok" if row["seconds"] < PURGE_TARGET_S else "MISSED"
            out.append(f"purge of 10^6 at {latency:g} ms: {row['seconds']:.1f} s ({ok}, target < {PURGE_TARGET_S:g} s)")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--million", action="store_true", help="add 10^6 (minutes; not for CI)")
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 80.0])
    parser.add_argument("--spark", action="store_true", help="include the Spark read (starts a local session)")
    parser.add_argument("--steps", nargs="+", help="only these steps (names as in STEPS)")
    parser.add_argument("--data-dir", action="store_true", help="a durable emulator (--data-dir), and the restart step")
    parser.add_argument(
        "--same-process", action="store_true", help="every size in this process (one process per size by default)"
    )
    args = parser.parse_args()
    sizes = args.sizes + ([1_000_000] if args.million else [])
    steps = [
        s
        for s in STEPS
        if (args.steps is None or s.name in args.steps)
        and (args.spark or not s.needs_spark)
        and (args.data_dir or not s.needs_data_dir)
    ]
    unknown = set(args.steps or []) - {s.name for s in STEPS}
    if unknown:
        parser.error(f"unknown steps {sorted(unknown)}; known: {[s.name for s in STEPS]}")
    rows: list[dict[str, Any]] = []
    if args.same_process or len(sizes) * len(args.latency_ms) == 1:
        rows = measure_here(sizes, args.latency_ms, steps, args.spark, args.data_dir)
    else:
        for latency in args.latency_ms:
            for n in sizes:
                rows += measure_apart(n, latency, steps, args)
    for line in verdicts(rows):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
