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
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soak.broker import DLQ, PURGED, QUEUE, Broker
from soak.figures import Figures
from soak.ledger import DEAD, DEFERRED, GONE, IN_QUEUE, sid_of
from soak.rounds import Rounds

from sbnotebook import core

__all__ = ["DLQ", "GONE", "IN_QUEUE", "PURGED", "QUEUE", "Broker", "Figures", "Soak", "main", "run"]


class Soak(Rounds):
    """The run: rounds of kit operations, the broker killed and restarted in the middle of some, and at
    the end every message accounted for against what the broker holds."""

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
