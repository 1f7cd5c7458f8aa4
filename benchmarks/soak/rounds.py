"""One round of the chaos soak: the kit's operations on the soak's queues, with random outcomes, each
failure checked to be one the kit reports; the run around the rounds is ``Soak`` (chaos_soak.py)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from sbnotebook import core

from .broker import DLQ, PURGED, QUEUE, Broker
from .figures import Figures
from .ledger import DEFERRED, IN_QUEUE, Ledger, sid_of


class Rounds:
    """The soak's state, and one round of kit operations, each through the safety net (``attempt``)."""

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
