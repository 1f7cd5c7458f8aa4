"""What a playbook's plan costs against ``%sb_dlq --summary --by signature`` of the same queue: both
one scan of the dead-letter queue (peeks: nothing locked), the plan giving each message to the first
of four rules (a signature glob, two searches of the body, a reason), the summary counting by
signature (``core.group_counts``). N messages (default 10^5) dead-lettered by expiry into the
default topology's ``expiring`` queue, bodies of four kinds round-robin; an emulator process of its
own at each latency (0 and 80 ms: a notebook far from its namespace). Reports each one's wall
seconds (best of ``--rounds``) and the plan's ratio to the summary.

Target (issue 73): the plan costs one scan, so its ratio to the summary is about 1.

    python benchmarks/playbook_plan.py [--messages 100000] [--latency-ms 0 80] [--rounds 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import start_emulator

from sbnotebook import core

QUEUE = "expiring"
PLAYBOOK = """\
playbook: bench
entities: [expiring]
rules:
  - name: expired-a
    when: {signature: "TTLExpiredException: *", where: "body_json.kind == 'a'"}
    do: resubmit
    target: results
  - name: b
    when: {where: "body_json.kind == 'b'"}
    do: park
    to: retries
  - name: c
    when: {where: "body_json.kind == 'c' and len(text) > 10"}
    do: discard
  - name: rest
    when: {reason: TTLExpiredException}
    do: keep
audit: audit
"""


def fill(n: int, conn: str) -> None:
    """``n`` messages that expire a second after they are sent, into the queue's dead-letter queue."""
    bodies = ({"body": {"kind": "abcd"[i % 4], "order": i, "pad": "x" * 200}, "time_to_live": 1} for i in range(n))
    core.send(QUEUE, bodies, max_in_flight=32, connection=conn).raise_for_failures()
    deadline = time.monotonic() + 60 + n / 5_000
    while core.counts(QUEUE, connection=conn).dead_letter < n:
        if time.monotonic() > deadline:
            raise SystemExit("the messages did not expire into the dead-letter queue in time")
        time.sleep(0.5)


def best(rounds: int, work: object) -> float:
    walls = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()  # type: ignore[operator]
        walls.append(time.perf_counter() - started)
    return min(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 80.0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="playbook-bench-"))
    (folder / "bench.yaml").write_text(PLAYBOOK, encoding="utf-8")
    book = core.playbook.load(folder / "bench.yaml")
    for latency in args.latency_ms:
        print(measure(book, args.messages, latency, args.rounds), flush=True)


def measure(book: core.playbook.Playbook, n: int, latency: float, rounds: int) -> str:
    """The summary's and the plan's best wall seconds over ``n`` dead letters at ``latency``."""
    proc, conn = start_emulator(latency)
    try:
        fill(n, conn)
        dlq = f"{QUEUE}/$deadletterqueue"
        plan = core.playbook.plan(book, connection=conn)  # warm: links open, as in a notebook
        assert len(plan.messages) == n, len(plan.messages)
        summary = best(rounds, lambda: core.group_counts(dlq, by=["signature"], connection=conn))
        planned = best(rounds, lambda: core.playbook.plan(book, connection=conn))
        return (
            f"{latency:g} ms, {n:,} dead letters: %sb_dlq --summary --by signature {summary:.2f} s, "
            f"playbook plan (4 rules) {planned:.2f} s: {planned / summary:.2f}x; plan {dict(plan.by_rule())}"
        )
    finally:
        core.close_all()
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
