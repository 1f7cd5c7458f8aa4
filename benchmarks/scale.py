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
                  trips: max_in_flight batches of batch_size, three round trips each (receive,
                  send the copies, complete the originals)
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
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from sbnotebook import core
from sbnotebook.core.resubmit import BATCH_SIZE, MAX_IN_FLIGHT

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
PURGE_TARGET_S = 20.0
GROWTH_TARGET = 1.2
RESUBMIT_TARGET = 0.8  # of the in-flight limit over round trips
SIGNATURE_TARGET = 1.2  # grouping by signature against by reason, per message
RESUBMIT_IN_FLIGHT, RESUBMIT_BATCH = MAX_IN_FLIGHT, BATCH_SIZE  # core.resubmit's defaults
MiB = 1024 * 1024


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


def fill_dead_letters(run: Run) -> int:
    """N messages that expire a second after they are sent, into EXPIRING's dead-letter queue."""
    bodies = ({"body": BODY, "time_to_live": 1} for _ in range(run.n))
    core.send(EXPIRING, bodies, max_in_flight=32, connection=run.conn).raise_for_failures()
    deadline = time.monotonic() + 60 + run.n / 5_000
    while core.counts(EXPIRING, connection=run.conn).dead_letter < run.n:
        if time.monotonic() > deadline:
            raise SystemExit("the messages did not expire into the dead-letter queue in time")
        time.sleep(0.5)
    return run.n


def resubmit(run: Run) -> int:
    report = core.resubmit(
        f"{EXPIRING}/$deadletterqueue",
        target=RETRY,
        max_in_flight=RESUBMIT_IN_FLIGHT,
        batch_size=RESUBMIT_BATCH,
        connection=run.conn,
    )
    assert report.count("resubmitted") == run.n and report.ok, report
    if run.latency_ms:
        ceiling = RESUBMIT_IN_FLIGHT * RESUBMIT_BATCH / (3 * run.latency_ms / 1000)
        run.extra["of in-flight limit"] = round(report.rate / ceiling, 2)
    return run.n


def purge_batch(run: Run) -> int:
    report = core.purge(QUEUE, connection=run.conn)
    assert report.count("purged") == run.n and report.stats.get("batch_delete_requests"), report
    return run.n


def purge_receive(run: Run) -> int:
    report = core.purge(PARTITIONED, connection=run.conn)
    assert report.count("purged") == run.n and any("refused" in n for n in report.notes), report
    return run.n


def fill_dlq(run: Run) -> int:
    """N messages in a dead-letter queue, three subjects round-robin: sent with a 1 s time to live,
    dead-lettered on expiry (seconds, where receiving and dead-lettering each would take minutes)."""
    if core.counts(EXPIRING, connection=run.conn).dead_letter == run.n:
        return run.n
    records = ({"body": BODY, "subject": f"s{i % 3}"} for i in range(run.n))
    core.send(EXPIRING, records, max_in_flight=32, connection=run.conn).raise_for_failures()
    while core.counts(EXPIRING, connection=run.conn).dead_letter < run.n:
        time.sleep(0.5)
    return run.n


def fill_dlq_and_open(run: Run) -> int:
    """The DLQ filled, and the panel opened once: the links it uses are open (cold paths are measured
    on their own, in benchmarks/interactive_latency.py)."""
    from sbnotebook.notebook.widgets import TriagePanel

    fill_dlq(run)
    TriagePanel(EXPIRING, connection=run.conn)
    return run.n


def triage_open(run: Run) -> int:
    from sbnotebook.notebook.widgets import TriagePanel

    for _ in range(5):
        panel = TriagePanel(EXPIRING, connection=run.conn)
    assert panel.total == run.n and len(panel.records) == core.PAGE_SIZE, (panel.total, len(panel.records))
    return 5


def triage_grouping(run: Run) -> int:
    counted = core.group_counts(DLQ, connection=run.conn)
    assert counted.done and counted.scanned == run.n and len(counted.counts("subject")) == 3, counted
    return run.n


def described(i: int) -> dict[str, Any]:
    """A message as a dead-letter queue delivers it, its description varying as real ones do."""
    kind = i % 3
    if kind == 0:
        reason, text = (
            "Timeout",
            f"Order {48_000 + i} failed after {100 + i % 900} ms calling https://api.contoso.com/orders/{i}",
        )
    elif kind == 1:
        reason, text = (
            "Validation",
            f"Customer 'c-{i}' unknown; trace {uuid.UUID(int=i)} at 2026-11-26T08:{i % 60:02d}:00Z",
        )
    else:
        reason, text = "Validation", f"total {-i} below zero for f{7919 * i % 0x10000000:07x}"  # a hex id
    return {"body": BODY, "application_properties": {"DeadLetterReason": reason, "DeadLetterErrorDescription": text}}


def fill_signed(run: Run) -> int:
    if core.counts(SIGNED, connection=run.conn).active < run.n:
        records = (described(i) for i in range(run.n))
        core.send(SIGNED, records, max_in_flight=32, connection=run.conn).raise_for_failures()
    core.peek(SIGNED, max_messages=1, connection=run.conn)  # its link open, as for every timed step
    return run.n


def grouping_by_reason(run: Run) -> int:
    counted = core.group_counts(SIGNED, by=["dead_letter_reason"], connection=run.conn)
    reasons = counted.counts("dead_letter_reason")
    assert counted.done and counted.scanned == run.n and set(reasons) == {"Timeout", "Validation"}, reasons
    return run.n


def grouping_by_signature(run: Run) -> int:
    counted = core.group_counts(SIGNED, by=["signature"], connection=run.conn)
    assert counted.done and counted.scanned == run.n and len(counted.counts("signature")) == 3, counted.counts(
        "signature"
    )
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


class Peak:
    """Samples a process's RSS every 50 ms while a step runs (``which``: the process now; the
    emulator's changes when a step restarts it)."""

    def __init__(self, which: Callable[[], psutil.Process]) -> None:
        self.which = which
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _take(self) -> None:
        with contextlib.suppress(psutil.NoSuchProcess, AssertionError):  # between a stop and a start
            self.peak = max(self.peak, self.which().memory_info().rss)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self._take()

    def __enter__(self) -> Peak:
        self._take()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._take()


class EmulatorProcess:
    """``sbnotebook emulator`` in its own process (its RSS apart from ours), restartable on the same
    data directory when durable."""

    def __init__(self, latency_ms: float, workdir: Path, durable: bool) -> None:
        config = workdir / "topology.json"
        config.write_text(json.dumps(TOPOLOGY))
        self.args = ["--port", "0", "--config", str(config), "--admin-port", "0", "--latency-ms", str(latency_ms)]
        if durable:
            self.args += ["--data-dir", str(workdir / "data")]
        self.proc: subprocess.Popen[str] | None = None
        self.conn = ""

    @property
    def process(self) -> psutil.Process:
        assert self.proc is not None
        return psutil.Process(self.proc.pid)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sbnotebook.emulator", *self.args], stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        for _ in range(8):
            line = self.proc.stdout.readline().strip()
            if re.match(r"^Endpoint=sb://", line):
                self.conn = line
                return
        self.stop()
        raise SystemExit("the emulator did not start")

    def stop(self) -> None:
        core.close_all()
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=120)
            self.proc = None


def _cpu(process: psutil.Process) -> float:
    """CPU seconds (user and system) the process has used so far (an emulator restarted within a
    step started again from zero: that step's emulator CPU is not meaningful)."""
    times = process.cpu_times()
    return float(times.user + times.system)


def measure(n: int, latency_ms: float, steps: list[Step], spark: Any, durable: bool) -> list[dict[str, Any]]:
    me = psutil.Process(os.getpid())
    with tempfile.TemporaryDirectory() as tmp:
        emu = EmulatorProcess(latency_ms, Path(tmp), durable)
        emu.start()
        try:
            run = Run(n, latency_ms, emu.conn, Path(tmp), spark, emulator_process=emu)
            base = emu.process.memory_info().rss
            core.counts(QUEUE, connection=run.conn)  # connected (and warm) before the first timed step
            for step in steps:
                if step.name in SETUP:
                    SETUP[step.name](run)
                cpu_before = _cpu(me), _cpu(emu.process)
                with Peak(lambda: me) as kernel, Peak(lambda: emu.process) as broker:
                    t0 = time.perf_counter()
                    handled = step.work(run)
                    elapsed = time.perf_counter() - t0
                kernel_cpu, emulator_cpu = _cpu(me) - cpu_before[0], _cpu(emu.process) - cpu_before[1]
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
                    "emulator CPU s": round(emulator_cpu, 1),
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
