"""scale.py's steps on dead letters: resubmit, the triage panel opening, grouping (by reason, by
signature), and the fills they need first (not timed)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from sbnotebook import core
from sbnotebook.core.incidents.resubmit.api import BATCH_SIZE
from sbnotebook.core.incidents.resubmit.workers import ROUND_TRIPS_A_BATCH

from .steps import BODY, DLQ, EXPIRING, RETRY, SIGNED, Run

RESUBMIT_IN_FLIGHT, RESUBMIT_BATCH = core.MAX_IN_FLIGHT, BATCH_SIZE  # core.resubmit's defaults


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
        ceiling = RESUBMIT_IN_FLIGHT * RESUBMIT_BATCH / (ROUND_TRIPS_A_BATCH * run.latency_ms / 1000)
        run.extra["of in-flight limit"] = round(report.rate / ceiling, 2)
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
