"""Chaos soak of the kit: thousands of messages through sbnotebook.core while the broker misbehaves.

Messages flow through the kit's own paths - ``core.send``, ``core.peek``, ``core.receive`` and
settlement with random outcomes (complete, abandon, dead-letter, defer), ``core.receive_deferred``
by sequence number, ``core.resubmit`` from the dead-letter queue, ``core.purge`` - against an
emulator process (``--data-dir``) that runs with injected faults (latency, server-busy rejections,
a slow entity, dropped receiving connections) and is killed with SIGKILL and restarted mid-run,
sometimes in the middle of an operation. Restarting releases every lock, as a Service Bus update
does, so settlement then meets lost locks.

At the end every message is accounted for exactly once: completed (reported so), dead-lettered
with a reason, or still there; no acknowledged send is lost; no message is completed twice; every
operation either succeeded or reported its failure (per message, or as one of the kit's errors);
and the kit reconnected by itself after each restart (the soak never calls reconnect).

Words, not only totals: the last thing a Report said about each message (sent, completed,
abandoned, dead-lettered, deferred, lock lost, resubmitted) is checked against where the broker
holds it at the end, message by message (``mismatched``); each purge's ``left`` outcomes against
what a peek finds right after it, and its ``ok`` against whether anything is left.

    python benchmarks/chaos_soak.py [--messages 20000] [--restarts 12] [--latency-ms 0] [--seed 1] [--spark]

With ``--spark``, rounds also go through the Spark data source on a local Spark: a ``mode=defer``
read on two partitions then ``sbnotebook.spark.settle`` (complete), and ``sbnotebook.spark.write``
of new messages; a restart can land in the middle of a Spark job, which then fails and says so
(its deferred messages stay on the broker, still there). ``tests/core/test_kit_soak.py`` runs short
versions in the suite (the Spark one with the other Spark tests).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sbnotebook import core
from sbnotebook.emulator.ports import restartable_port

QUEUE = "soak"
PURGED = "soak-purge"
DLQ = f"{QUEUE}/$deadletterqueue"
TOPOLOGY: dict[str, Any] = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "soak",
                "Queues": [
                    {
                        "Name": QUEUE,
                        # Duplicate detection: a send retried after a lost acknowledgement stays one message.
                        "Properties": {
                            "LockDuration": "PT5S",
                            "MaxDeliveryCount": 4,
                            "RequiresDuplicateDetection": True,
                            "DuplicateDetectionHistoryTimeWindow": "PT10M",
                        },
                    },
                    {"Name": PURGED, "Properties": {}},
                ],
            }
        ]
    }
}
SETTLED_OK = {"completed", "abandoned", "dead_lettered", "deferred"}


@dataclass
class Figures:
    messages: int = 0  # sends attempted
    acknowledged: int = 0
    send_failures: int = 0  # sends reported failed (may or may not have arrived)
    completed: int = 0
    dead_lettered: int = 0  # in the dead-letter queue at the end
    still_there: int = 0
    deferred_fetched: int = 0
    resubmitted: int = 0
    purged: int = 0
    spark_read: int = 0  # deferred by Spark reads
    spark_settled: int = 0  # of those, completed by spark.settle
    spark_written: int = 0  # acknowledged sends by spark.write
    settle_failures: int = 0  # per-message settlement outcomes that reported a failure (lock lost, ...)
    operation_errors: int = 0  # whole operations that raised one of the kit's errors
    faults_injected: int = 0
    restarts: int = 0
    reconnects: int = 0
    lost: int = 0
    duplicates: int = 0  # a message present more than once without a reported reason
    completed_twice: int = 0
    mismatched: int = 0  # a Report's last word on a message that the broker's state contradicts
    checked: int = 0  # messages whose last reported outcome was compared with the broker's state
    # acknowledged messages whose last word cannot be checked: a settlement or operation reported a
    # failure that may or may not have applied (they still count in lost and duplicates)
    unchecked: int = 0
    errors: Counter[str] = field(default_factory=Counter)  # the kit's errors, by operation and text
    slowest: list[tuple[float, str]] = field(default_factory=list)  # (seconds, operation), the slowest calls
    unreported: list[str] = field(default_factory=list)  # failures that were not the kit's errors
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        spark = (
            f"spark_read={self.spark_read} spark_settled={self.spark_settled} spark_written={self.spark_written} "
            if self.spark_read or self.spark_written
            else ""
        )
        return (
            f"messages={self.messages} acknowledged={self.acknowledged} completed={self.completed} "
            f"dead_lettered={self.dead_lettered} still_there={self.still_there} "
            f"deferred_fetched={self.deferred_fetched} resubmitted={self.resubmitted} purged={self.purged} {spark}"
            f"settle_failures={self.settle_failures} operation_errors={self.operation_errors} "
            f"faults_injected={self.faults_injected} restarts={self.restarts} reconnects={self.reconnects} "
            f"lost={self.lost} duplicates={self.duplicates} completed_twice={self.completed_twice} "
            f"checked={self.checked} unchecked={self.unchecked} mismatched={self.mismatched} "
            f"unreported={len(self.unreported)}"
        )

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.duplicates or self.completed_twice or self.mismatched or self.unreported or self.problems
        )


# Where a Report's last word on a message says the broker holds it at the end.
IN_QUEUE = "in the queue"  # active (or dead-lettered by Service Bus after too many deliveries)
DEFERRED = "deferred in the queue"
DEAD = "in the dead-letter queue"
GONE = "gone"
AFTER = {"completed": GONE, "dead_lettered": DEAD, "deferred": DEFERRED, "abandoned": IN_QUEUE}


class Broker:
    """The emulator as a process: started with this epoch's faults, killed with SIGKILL."""

    def __init__(self, workdir: Path, rng: random.Random, latency_ms: float) -> None:
        self.port = restartable_port()  # the same port across kills (the kit reconnects to it)
        self.stderr_path = workdir / "emulator.stderr"
        self.data_dir = workdir / "data"
        self.config = workdir / "topology.json"
        self.config.write_text(json.dumps(TOPOLOGY))
        self.rng = rng
        self.latency_ms = latency_ms
        self.proc: subprocess.Popen[str] | None = None
        self.connection_string = ""
        self.faults = 0

    def start(self, *, faults: bool = True) -> None:
        args = ["--port", str(self.port), "--data-dir", str(self.data_dir), "--config", str(self.config)]
        if faults:
            rejections = self.rng.randint(1, 4)
            args += ["--reject-sends", f"{QUEUE}={rejections}:server-busy"]
            args += ["--latency-ms", str(self.latency_ms + self.rng.choice([0, 2, 5]))]
            self.faults += rejections + 1
            if self.rng.random() < 0.5:
                args += ["--slow", f"{QUEUE}={self.rng.choice([5, 20])}"]
                self.faults += 1
            if self.rng.random() < 0.5:
                args += ["--drop-after", f"{QUEUE}={self.rng.randint(60, 200)}"]
                self.faults += 1
        else:
            args += ["--latency-ms", str(self.latency_ms)]
        for _ in range(50):  # the port of a killed broker can take a moment to free
            # stderr to a file: a pipe nobody reads fills up and then blocks the broker's logging.
            with self.stderr_path.open("a") as stderr:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "sbnotebook.emulator", *args],
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    text=True,
                )
            assert self.proc.stdout is not None
            for _ in range(6):
                line = self.proc.stdout.readline().strip()
                if line.startswith("Endpoint=sb://"):
                    self.connection_string = line
                    return
                if not line and self.proc.poll() is not None:
                    break
            self.proc.kill()
            self.proc.wait()
            time.sleep(0.2)
        said = self.stderr_path.read_text().strip().splitlines()[-3:]
        raise RuntimeError(f"the emulator did not start on port {self.port}: {' / '.join(said) or 'it said nothing'}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


class Ledger:
    """What the kit reported, per soak id (an application property every copy keeps)."""

    def __init__(self, figures: Figures) -> None:
        self.f = figures
        self.next_sid = 0
        self.acknowledged: set[int] = set()
        self.unacknowledged: set[int] = set()  # a send reported failed: it may have arrived anyway
        self.completed: set[int] = set()
        self.uncertain: set[int] = set()  # a settlement reported failed but not "lock lost": may have applied
        self.may_repeat: set[int] = set()  # a resubmit reported a failure after its copy went out
        self.deferred: dict[int, int] = {}  # sequence number -> sid
        # sid -> (where the last report puts it, what that report said); no entry: no word that can
        # be checked (a send or settlement that failed may or may not have applied).
        self.said: dict[int, tuple[str, str]] = {}
        self.deferred_unknown = False  # a Spark read failed: it may have deferred messages unnamed

    def expect(self, sid: int, where: str | None, what: str) -> None:
        if where is None:
            self.said.pop(sid, None)
        else:
            self.said[sid] = (where, what)

    def new_messages(self, n: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            sid = self.next_sid
            self.next_sid += 1
            out.append({"body": json.dumps({"sid": sid}), "message_id": f"soak-{sid}",
                        "application_properties": {"sid": str(sid)}})  # fmt: skip
        return out

    def sent(self, items: list[dict[str, Any]], report: core.Report) -> None:
        self.f.messages += len(items)
        by_index = {o.index: o for o in report.every() if o.index is not None}
        for i, item in enumerate(items):
            sid = int(item["application_properties"]["sid"])
            o = by_index.get(i)
            if o is not None and o.outcome == "sent":
                self.acknowledged.add(sid)
                self.f.acknowledged += 1
                self.expect(sid, IN_QUEUE, "send: sent")
            else:
                self.unacknowledged.add(sid)
                self.f.send_failures += 1

    def settled(self, action: str, sids: dict[int, int], report: core.Report, *, unlocked: str = IN_QUEUE) -> None:
        """``sids``: the batch's row -> soak id of the rows settled; outcomes name their row.
        ``unlocked``: where a message whose lock was lost stays (deferred ones stay deferred)."""
        by_index = {o.index: o for o in report.every()}
        for row, sid in sids.items():
            o = by_index.get(row)
            if o is None:
                self.f.problems.append(f"{action}: no outcome for row {row} ({len(sids)} settled)")
                self.expect(sid, None, "")
                continue
            what = f"{action}: {o.outcome}"
            if o.outcome in SETTLED_OK:
                if action == "complete":
                    if sid in self.completed:
                        self.f.completed_twice += 1
                    self.completed.add(sid)
                    self.f.completed += 1
                self.uncertain.discard(sid)
                self.expect(sid, AFTER[o.outcome], what)
            elif o.outcome == "already_settled":
                continue
            else:
                self.f.settle_failures += 1
                if o.outcome != "lock_lost":
                    self.uncertain.add(sid)
                self.expect(sid, unlocked if o.outcome == "lock_lost" else None, what)

    def not_known(self, sids: Any) -> None:
        """An operation raised: what it did to these messages is not known."""
        for sid in sids:
            self.expect(sid, None, "")


def sid_of(record: dict[str, Any]) -> int:
    return int(json.loads(record["application_properties"]["sid"]) if record["application_properties"] else -1)


class Soak:
    def __init__(self, *, messages: int, restarts: int, seed: int, workdir: Path, latency_ms: float,
                 log: Callable[[str], None]) -> None:  # fmt: skip
        self.total = messages
        self.restarts_planned = restarts
        self.rng = random.Random(seed)
        self.log = log
        self.f = Figures()
        self.ledger = Ledger(self.f)
        self.broker = Broker(workdir, self.rng, latency_ms)
        self.conn: core.LiveConnection | None = None
        self.spark: Any = None  # a local SparkSession when the soak includes the Spark paths

    # ------------------------------------------------------------ safety net

    def attempt(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run one kit operation. Its failure must be one of the kit's errors, in one line."""
        started = time.monotonic()
        try:
            return fn()
        except core.SbError as exc:
            self.f.operation_errors += 1
            self.f.errors[f"{what}: {str(exc)[:90]}"] += 1
            if "\n" in str(exc) or "Traceback" in str(exc):
                self.f.unreported.append(f"{what}: a multi-line error: {exc!r}"[:300])
            return None
        except Exception as exc:
            if self.spark is not None and _is_spark_error(exc):
                # A Spark job that failed (an executor's receive met the restart): Spark reports it as
                # its own exception holding the kit's one-line error. A failure reported, not hidden.
                self.f.operation_errors += 1
                self.f.errors[f"{what}: {_first_line(exc)[:90]}"] += 1
                return None
            self.f.unreported.append(f"{what}: {type(exc).__name__}: {exc}"[:300])
            return None
        finally:
            self.f.slowest = sorted([*self.f.slowest, (time.monotonic() - started, what)], reverse=True)[:5]

    # ------------------------------------------------------------ one round

    def round(self, size: int) -> None:
        conn = self.conn
        led = self.ledger
        items = led.new_messages(size)
        report = self.attempt("send", lambda: core.send(QUEUE, items, connection=conn))
        if report is None:
            led.unacknowledged.update(int(i["application_properties"]["sid"]) for i in items)
            self.f.messages += len(items)
            self.f.send_failures += len(items)
        else:
            led.sent(items, report)
        self.attempt("peek", lambda: core.peek(QUEUE, max_messages=50, connection=conn))
        for _ in range(2):
            self.receive_and_settle(self.rng.randint(10, 60))
        if led.deferred and self.rng.random() < 0.6:
            self.fetch_deferred()
        if self.rng.random() < 0.3:
            self.resubmit()
        if self.rng.random() < 0.15:
            self.purge_round()
        if self.spark is not None and self.rng.random() < 0.4:
            self.spark_round()

    def receive_and_settle(self, count: int) -> None:
        batch = self.attempt(
            "receive", lambda: core.receive(QUEUE, max_messages=count, wait_seconds=0.5, connection=self.conn)
        )
        if batch is None:
            return
        with batch:
            groups: dict[str, list[int]] = {"complete": [], "abandon": [], "dead_letter": [], "defer": []}
            for i in range(len(batch)):
                roll = self.rng.random()
                action = ("complete" if roll < 0.55 else "abandon" if roll < 0.7
                          else "dead_letter" if roll < 0.8 else "defer")  # fmt: skip
                groups[action].append(i)
            records = batch.records
            for action, rows in groups.items():
                if not rows:
                    continue
                if action == "dead_letter":
                    report = self.attempt(
                        action,
                        lambda rows=rows: batch.dead_letter(rows, reason="soak-bad", description="picked at random"),
                    )
                else:
                    report = self.attempt(action, lambda a=action, rows=rows: getattr(batch, a)(rows))
                sids = {i: sid_of(records[i]) for i in rows}
                if report is None:
                    self.ledger.not_known(sids.values())
                    continue
                self.ledger.settled(action, sids, report)
                if action == "defer":
                    for o in report.every():
                        if o.outcome == "deferred" and o.index in sids:
                            self.ledger.deferred[int(records[o.index]["sequence_number"])] = sids[o.index]

    def fetch_deferred(self) -> None:
        seqs = list(self.ledger.deferred)[:30]
        batch = self.attempt("receive_deferred", lambda: core.receive_deferred(QUEUE, seqs, connection=self.conn))
        if batch is None:
            return
        with batch:
            got = [int(r["sequence_number"]) for r in batch.records]
            sids = {i: self.ledger.deferred[seq] for i, seq in enumerate(got)}
            report = self.attempt("complete deferred", lambda: batch.complete())
            if report is None:
                self.ledger.not_known(sids.values())
            else:
                self.ledger.settled("complete", sids, report, unlocked=DEFERRED)
                for o in report.every():
                    if o.outcome == "completed" and o.index is not None:
                        self.ledger.deferred.pop(got[o.index], None)
                        self.f.deferred_fetched += 1

    def resubmit(self) -> None:
        # Copies take fresh message ids; the soak id travels in the application properties, and the
        # report names each original by its sequence number in the dead-letter queue.
        page = self.attempt("peek dead letters", lambda: core.peek(DLQ, max_messages=200, connection=self.conn))
        if page is None:
            return
        sid_by_seq = {int(r["sequence_number"]): sid_of(r) for r in page.records}
        report = self.attempt(
            "resubmit", lambda: core.resubmit(DLQ, target=QUEUE, max_messages=40, connection=self.conn)
        )
        if report is None:
            self.ledger.may_repeat.update(sid_by_seq.values())  # it may have got part of the way
            self.ledger.not_known(sid_by_seq.values())
            return
        for o in report.every():
            sid = sid_by_seq.get(o.sequence_number) if o.sequence_number is not None else None
            if o.outcome == "resubmitted":
                self.f.resubmitted += 1
                if sid is None:  # moved, but not among the peeked: where it is cannot be checked
                    self.ledger.not_known(sid_by_seq.values())
                else:
                    self.ledger.expect(sid, IN_QUEUE, "resubmit: resubmitted")
            elif not o.ok:
                # The copy may be out while the original stayed: the design's "duplicates, never loses".
                if sid is None:
                    self.ledger.may_repeat.update(sid_by_seq.values())
                    self.ledger.not_known(sid_by_seq.values())
                else:
                    self.ledger.may_repeat.add(sid)
                    self.ledger.expect(sid, None, "")

    def purge_round(self) -> None:
        items = [{"body": "to be purged"} for _ in range(self.rng.randint(5, 40))]
        self.attempt("send to purge", lambda: core.send(PURGED, items, connection=self.conn))
        report = self.attempt("purge", lambda: core.purge(PURGED, connection=self.conn))
        if report is not None:
            self.f.purged += report.count("purged")
            self.check_purge(report)

    def check_purge(self, report: core.Report) -> None:
        """A purge's words against the broker, at once (nothing else uses its queue): the messages
        it says are left are exactly those still there, and it is ok only when none is."""
        left = self.attempt("peek purged", lambda: core.peek(PURGED, max_messages=250, connection=self.conn))
        if left is None:
            return
        there = {int(r["sequence_number"]) for r in left.records}
        said = {o.sequence_number for o in report.failures if o.outcome == "left"}  # problems: all kept
        self.f.checked += report.total
        if there != said or report.ok != (not there):
            self.f.mismatched += 1
            self.f.problems.append(
                f"purge said {report.summary()!r}; {len(there)} message(s) are there: {sorted(there)[:5]}"
            )

    def spark_round(self) -> None:
        """A ``mode=defer`` read on two partitions, settled (completed) by sequence number from the
        driver; and new messages written by ``spark.write`` from a DataFrame."""
        from sbnotebook import spark as sbspark

        spark = self.spark
        reader = (spark.read.format("servicebus").option("entity", QUEUE).option("mode", "defer")
                  .option("maxMessages", self.rng.randint(10, 60)).option("numPartitions", 2))  # fmt: skip
        df = self.attempt("spark read (defer)", lambda: reader.load().cache())
        columns = ("sequence_number", "application_properties")
        rows = self.attempt("spark read (defer)", lambda: df.select(*columns).collect()) if df is not None else None
        if rows is None:
            self.ledger.deferred_unknown = True  # a failed read may have deferred messages it never named
        if rows is not None:
            self.f.spark_read += len(rows)
            sid_by_seq = {int(r.sequence_number): int(r.application_properties["sid"]) for r in rows}
            for sid in sid_by_seq.values():
                self.ledger.expect(sid, DEFERRED, "spark read (defer): deferred")
            report = self.attempt("spark settle", lambda: sbspark.settle(df, "complete"))
            if report is None:
                self.ledger.not_known(sid_by_seq.values())
            else:
                by_row = {i: sid_by_seq[o.sequence_number] for i, o in enumerate(report.every())
                          if o.sequence_number in sid_by_seq}  # fmt: skip
                self.ledger.settled("complete", by_row, _indexed(report), unlocked=DEFERRED)
                self.f.spark_settled += sum(1 for o in report.outcomes if o.outcome == "completed")
        if df is not None:
            df.unpersist()
        items = self.ledger.new_messages(self.rng.randint(5, 40))
        frame = spark.createDataFrame(
            [(i["body"], i["message_id"], i["application_properties"]) for i in items],
            "body string, message_id string, application_properties map<string,string>",
        )
        sent = self.attempt("spark write", lambda: sbspark.write(frame, QUEUE))
        self.f.messages += len(items)
        sids = [int(i["application_properties"]["sid"]) for i in items]
        if sent is not None and sent.ok and sent.count("sent") == len(items):
            self.ledger.acknowledged.update(sids)
            self.f.acknowledged += len(items)
            self.f.spark_written += len(items)
            for sid in sids:
                self.ledger.expect(sid, IN_QUEUE, "spark write: sent")
        else:  # failed or part-way: each may or may not have arrived
            self.ledger.unacknowledged.update(sids)
            self.f.send_failures += len(items)

    # ------------------------------------------------------------ the run

    def restart_during(self, fn: Callable[[], None]) -> None:
        """Kill the broker at a random moment while ``fn`` runs and start it again shortly after,
        so operations in flight meet a dead connection and then a new broker."""
        restarted = threading.Event()
        failure: list[BaseException] = []

        def kill_and_restart() -> None:
            try:
                self.broker.kill()
                time.sleep(self.rng.uniform(0.0, 0.5))  # calls in this gap are refused and must say so
                self.broker.start()
            except BaseException as exc:
                failure.append(exc)
            finally:
                restarted.set()

        timer = threading.Timer(self.rng.uniform(0.0, 1.5), kill_and_restart)
        timer.start()
        fn()
        timer.join()
        if failure:
            raise failure[0]
        self.f.restarts += 1

    def run(self) -> Figures:
        self.broker.start()
        self.conn = core.connect(self.broker.connection_string, warm=False)
        if self.spark is not None:
            from sbnotebook import spark as sbspark

            sbspark.register(self.spark, self.broker.connection_string)  # the port stays across restarts
        rounds = max(1, self.total // 100)
        restart_at = (
            set(self.rng.sample(range(1, rounds), min(self.restarts_planned, rounds - 1))) if rounds > 1 else set()
        )
        size = self.total // rounds
        started = time.monotonic()
        try:
            for r in range(rounds):
                n = size if r < rounds - 1 else self.total - size * (rounds - 1)
                if r in restart_at:
                    self.restart_during(lambda n=n: self.round(n))
                else:
                    self.round(n)
                if r % 10 == 0:
                    self.log(f"round {r + 1}/{rounds}: {time.monotonic() - started:.0f} s, {self.f.line()}")
            self.broker.kill()  # the last restart: without faults, for the final count
            self.broker.start(faults=False)
            self.f.restarts += 1
            self.account()
        finally:
            self.f.faults_injected = self.broker.faults
            self.f.reconnects = self.conn.reconnects if self.conn is not None else 0
            core.close_all()
            self.broker.stop()
        return self.f

    def account(self) -> None:
        led = self.ledger
        present: Counter[int] = Counter()
        held: dict[int, list[str]] = {}  # sid -> where the broker holds it (one entry per copy)
        for entity in (QUEUE, DLQ):
            records = self.attempt(
                f"final scan of {entity}", lambda e=entity: core.scan_records(e, connection=self.conn)
            )
            if records is None:
                self.f.problems.append(f"could not scan {entity} at the end")
                return
            for rec in records:
                sid = sid_of(rec)
                present[sid] += 1
                if entity == DLQ:
                    too_many = rec.get("dead_letter_reason") == "MaxDeliveryCountExceeded"
                    held.setdefault(sid, []).append(f"{DEAD} (too many deliveries)" if too_many else DEAD)
                else:
                    held.setdefault(sid, []).append(DEFERRED if rec.get("state") == "deferred" else IN_QUEUE)
                if entity == DLQ:
                    self.f.dead_lettered += 1
                    if not rec.get("dead_letter_reason"):
                        self.f.problems.append(f"message {sid} dead-lettered without a reason")
                else:
                    self.f.still_there += 1
        for sid, n in present.items():
            if n > 1 and sid not in led.may_repeat:
                self.f.duplicates += 1
                self.f.problems.append(f"message {sid} is there {n} times")
            if sid in led.completed:
                if sid in led.may_repeat or sid in led.uncertain:
                    continue
                self.f.completed_twice += 1
                self.f.problems.append(f"message {sid} was reported completed and is still there")
        for sid in led.acknowledged:
            if sid not in present and sid not in led.completed and sid not in led.uncertain:
                self.f.lost += 1
                if self.f.lost <= 10:
                    self.f.problems.append(f"acknowledged message {sid} is gone without being completed")
        self.compare_words(held)
        if self.f.restarts and self.f.reconnects == 0 and self.conn is not None and self.conn.reconnects == 0:
            self.f.problems.append("the broker restarted but the kit never reconnected")

    def compare_words(self, held: dict[int, list[str]]) -> None:
        """Each message's last reported outcome against where the broker holds it now."""
        self.f.unchecked = len(self.ledger.acknowledged - self.ledger.said.keys())
        for sid, (where, what) in self.ledger.said.items():
            there = held.get(sid, [])
            if sid in self.ledger.may_repeat and len(there) > 1:
                continue  # a reported duplicate: checked by the accounting above
            now = there[0] if len(there) == 1 else GONE if not there else " and ".join(there)
            allowed = {where}
            if where == IN_QUEUE:  # abandoned or lock lost: Service Bus may have dead-lettered it since
                allowed.add(f"{DEAD} (too many deliveries)")
                if self.ledger.deferred_unknown:
                    allowed.add(DEFERRED)
            if where == DEAD:
                allowed.add(f"{DEAD} (too many deliveries)")  # dead-lettered again after a resubmit
            self.f.checked += 1
            if now not in allowed:
                self.f.mismatched += 1
                if self.f.mismatched <= 10:
                    self.f.problems.append(f"message {sid}: the report said {what!r}; the broker: {now}")


def _is_spark_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith(("pyspark", "py4j"))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _indexed(report: core.Report) -> core.Report:
    """spark.settle's outcomes name messages by sequence number; the ledger reads them by row."""
    out = core.Report(report.operation, report.entity)
    for i, o in enumerate(report.outcomes):
        out.add(replace(o, index=i))
    return out


def run(*, messages: int = 2000, restarts: int = 3, seed: int = 1, latency_ms: float = 0.0,
        workdir: Path | None = None, log: Callable[[str], None] = print, spark: Any = None) -> Figures:  # fmt: skip
    """Run the soak; returns its figures (``figures.ok`` says whether everything was accounted for).
    ``spark``: a SparkSession to include the Spark paths (``spark_round``)."""
    with tempfile.TemporaryDirectory(prefix="sbnotebook-soak-") as tmp:
        soak = Soak(messages=messages, restarts=restarts, seed=seed, workdir=Path(workdir or tmp),
                    latency_ms=latency_ms, log=log)  # fmt: skip
        soak.spark = spark
        return soak.run()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--restarts", type=int, default=12)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", "1")))
    parser.add_argument("--spark", action="store_true", help="also read/settle/write through Spark (local[2])")
    args = parser.parse_args()
    spark = None
    if args.spark:
        from sbnotebook import spark as sbspark

        spark = sbspark.local_session("chaos-soak")
    started = time.monotonic()
    figures = run(messages=args.messages, restarts=args.restarts, seed=args.seed, latency_ms=args.latency_ms,
                  spark=spark)  # fmt: skip
    print(f"chaos soak ({time.monotonic() - started:.0f} s, seed {args.seed}, latency {args.latency_ms:g} ms)")
    print(figures.line())
    for problem in figures.problems[:20] + figures.unreported[:20]:
        print("  problem:", problem)
    for error, n in figures.errors.most_common(8):
        print(f"  reported {n}x: {error}")
    print("  slowest calls:", ", ".join(f"{what} {s:.1f} s" for s, what in figures.slowest))
    return 0 if figures.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
