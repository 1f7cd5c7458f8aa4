"""A copy of many messages, within a namespace or between two: killed midway (SIGKILL) and run again with the
same call, it sends only what is left; stopped by a broker gone for good, it says it stopped; it holds at most
one page of messages; its record (named by its own arguments) is left only when something was sent, started
over for a source created again, and said when unreadable."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.emulator import Emulator
from tests.core.incidents import bulk
from tests.helpers import InterruptAtFirstProgress, QuickCloseClient
from tests.interrupting import answered
from tests.processes import run_and_kill, start_cli_emulator

emulator = bulk.emulator  # the fixture: an emulator serving bulk.TOPOLOGY


@pytest.mark.timeout(120)
def test_a_copy_stopped_by_a_broker_gone_for_good_does_not_count_only_its_failures(tmp_path: Path) -> None:
    """The broker dies during a copy and stays down: the note said "N messages not copied" with N
    the few in flight, where most of the source was never read; it now says the copy stopped."""
    n = 3000
    proc, cs = start_cli_emulator("--port", "0", "--admin-port", "0", "--latency-ms", "50")
    try:
        conn = core.connect(cs, warm=False)
        core.send("orders", (f"m{i}" for i in range(n)), max_in_flight=16, connection=conn).raise_for_failures()

        def kill_at_first_progress(report: core.Report) -> None:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

        report = core.copy("orders", "results", max_in_flight=2, progress=kill_at_first_progress, connection=conn)
    finally:
        core.close_all()
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
    failed = sum(1 for o in report.failures if o.index is not None)
    assert report.count("sent") + failed < n and not report.ok, report
    assert any("the copy stopped before the end of orders" in note for note in report.notes), report.notes


_COPY = """
    import sys
    from sbnotebook import core
    core.copy(sys.argv[1], sys.argv[2], connection=sys.argv[3])
"""


def test_a_copy_killed_midway_sends_only_what_is_left_from_another_process(emulator: Emulator) -> None:
    """A copy killed (SIGKILL: as a kernel restart ends it) leaves its record on disk; the same copy
    in another process (a new kernel) sends only what the record does not hold as copied. The copies
    in flight at the kill are sent again with the same ids: the target's duplicate detection drops
    them, so the target holds each message exactly once and the source is left as it was."""
    cs = emulator.connection_string
    n = 3000
    core.send("plain", ({"body": f"{i:06d}", "message_id": f"m-{i}"} for i in range(n)), connection=cs)
    emulator.latency_ms = 100
    run_and_kill(_COPY, ["plain", "dst", cs], lambda: emulator.broker.counts("dst")["active"] >= 800)
    emulator.latency_ms = 0
    before = emulator.broker.counts("dst")["active"]
    assert 800 <= before < n
    recorded = core.copy_resume_point("plain", "dst", connection=cs)
    assert recorded is not None and recorded.pending and 0 < recorded.done <= n
    record = core.copy_record("plain", "dst", connection=cs)
    assert record.is_file() and record.parent.parent == Path(os.environ["SBNOTEBOOK_HOME"])
    copied_before = recorded.copied
    assert 0 < copied_before <= before  # recorded as copied: never more than what arrived
    report = core.copy("plain", "dst", connection=cs)
    assert report.ok and report.count("sent") == n - copied_before, report  # only what is left
    assert any("resumed" in note for note in report.notes)
    assert emulator.broker.counts("dst")["active"] == n  # the copies sent twice were dropped
    bodies = sorted(r["body_text"] for r in core.scan_records("dst", connection=cs))
    assert bodies == [f"{i:06d}" for i in range(n)]  # each message once
    assert emulator.broker.counts("plain")["active"] == n  # peeked: the source as it was
    assert not record.exists()  # complete: the same copy again copies everything
    assert core.copy_resume_point("plain", "dst", connection=cs) is None


@pytest.mark.timeout(180)
def test_a_copy_holds_at_most_max_held_bytes() -> None:
    """Far from the namespace (50 ms), a copy of 3,000 messages of 1 KB between two brokers, bounded
    to what one page (PAGE_SIZE) of them takes encoded, holds at most that in memory at once: counted
    by the copy from the moment a peek may bring them until the target confirms them, and, read
    independently, the memory it allocated while it ran beyond what its Report keeps (tracemalloc;
    the brokers in their own processes) stays within 2.5 times what one page of peeked messages takes
    (1.44-1.69 in ten runs alone). With a bound of two pages the figure depended on whether the peeks
    got a page ahead of the sends (1.5 to 3.02, once over this test's old limit of 3.0 in a loaded
    suite run): one page keeps that timing out of the assertion. Before the bound, the sends in flight
    held up to max_in_flight batches besides the pages: 3.7, so this fails then."""
    import tracemalloc

    from sbnotebook.core.entities import EntityPath
    from sbnotebook.core.incidents.copy.read_ahead import held_size
    from sbnotebook.core.operations.scan import apeek_once

    n = 3000
    a, source_cs = start_cli_emulator("--port", "0", "--admin-port", "0", "--latency-ms", "50")
    b, target_cs = start_cli_emulator("--port", "0", "--admin-port", "0", "--latency-ms", "50")
    try:
        src = core.connect(source_cs, warm=False)
        dst = core.connect(target_cs, warm=False)
        core.send("orders", ("x" * 1000 for _ in range(n)), max_in_flight=16, connection=src).raise_for_failures()
        warm = core.copy("orders", "results", max_messages=300, source_connection=src, connection=dst)
        warm.raise_for_failures()
        peeked = src.run(apeek_once(src, EntityPath("orders"), 1, core.PAGE_SIZE))  # as the copy peeks them
        bound = sum(held_size(m) for m in peeked)
        del peeked
        tracemalloc.start()
        page = next(iter(core.scan("orders", connection=src)))
        one_page = tracemalloc.get_traced_memory()[0]
        del page
        tracemalloc.stop()
        tracemalloc.start()
        report = core.copy("orders", "results", max_held_bytes=bound, source_connection=src, connection=dst)
        kept, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert report.ok and report.count("sent") == n, report
        assert core.counts("results", connection=dst).active == n + 300
        assert core.counts("orders", connection=src).active == n
        assert 0 < report.stats["peak_held_bytes"] <= bound, (report.stats, bound)
        assert report.stats["peak_held"] <= 2 * core.PAGE_SIZE, report.stats
        working = (peak - kept) / one_page
        assert working <= 2.5, f"the copy held {working:.2f} pages' worth of memory"
    finally:
        core.close_all()
        for proc in (a, b):
            proc.terminate()
            proc.wait(timeout=30)


def test_a_copys_own_arguments_name_its_record(emulator: Emulator) -> None:
    """copy_record and copy_resume_point take a copy's arguments as they are (acopy's): those that
    do not choose the record (max_in_flight, progress, resume) change nothing; a copy that keeps no
    record (state=, a where function) is refused rather than given a file it never writes."""
    cs = emulator.connection_string
    options: dict[str, Any] = {"where": "body_text == 'b'", "keep_message_id": True, "max_messages": 5}
    record = core.copy_record("plain", "dst", connection=cs, **options)
    same = core.copy_record("plain", "dst", max_in_flight=3, progress=print, resume=False, connection=cs, **options)
    assert same == record != core.copy_record("plain", "dst", connection=cs)
    assert core.copy_resume_point("plain", "dst", max_in_flight=3, connection=cs, **options) is None
    for keeps_none in ({"state": core.CopyProgress("plain", "dst")}, {"where": lambda record: True}):
        with pytest.raises(core.InvalidInputError, match="keeps no record"):
            core.copy_record("plain", "dst", connection=cs, **keeps_none)
        with pytest.raises(core.InvalidInputError, match="keeps no record"):
            core.copy_resume_point("plain", "dst", connection=cs, **keeps_none)


@pytest.mark.timeout(60)
def test_a_copy_that_skips_more_than_it_may_hold_still_reads_to_the_end(emulator: Emulator) -> None:
    """Messages a copy skips (not selected by where, or copied by an earlier run) leave memory as
    they are skipped: counted as held, more than the bound of them would stop the peeks, and the copy
    would wait for ever."""
    cs = emulator.connection_string
    n = 2 * core.PAGE_SIZE + 3
    core.send("plain", [f"m{i}" for i in range(1, n)] + ["last"], connection=cs).raise_for_failures()
    small = 4096  # bytes: a few dozen of these messages
    report = core.copy("plain", "dst", where="body_text == 'last'", resume=False, max_held_bytes=small, connection=cs)
    assert report.ok and report.count("sent") == 1, report
    state = core.CopyProgress("plain", "dst", done=n, failed={1})  # only the first failed before
    report = core.copy("plain", "dst", state=state, max_held_bytes=small, connection=cs)
    assert report.ok and report.count("sent") == 1 and state.complete, report
    copies = core.peek("dst", max_messages=10, connection=cs)
    # The send's batches run concurrently: which body got sequence number 1 is the broker's to say.
    with QuickCloseClient.from_connection_string(cs) as client, client.get_queue_receiver("plain") as receiver:
        (first,) = receiver.peek_messages(1, sequence_number=1)
    assert first.sequence_number == 1
    assert sorted(r["body_text"] for r in copies.records) == sorted(["last", str(first)])


@pytest.mark.timeout(60)
def test_a_copy_awaited_on_another_loop_waits_there_for_its_records_creation_times(emulator: Emulator) -> None:
    """``acopy`` awaited on a loop of the caller's (a notebook's) asks for the entities' creation times
    on that loop and sends on the target's: when the administration API answered after the first
    peek, the first send awaited a task of the other loop and the copy failed ("attached to a different
    loop"; seen in CI). Now it waits for them, whichever loop it is on, and copies everything."""
    cs = emulator.connection_string
    n = 50
    core.send("plain", [f"m{i}" for i in range(n)], connection=cs).raise_for_failures()  # the links open

    async def copied() -> core.Report:
        return await core.acopy("plain", "dst", resume=False, connection=cs)

    emulator._api.latency = 2.0  # the administration API answers 2 s late, the AMQP side at once
    try:
        report = asyncio.run(copied())
    finally:
        emulator._api.latency = 0.0
    assert report.ok and report.count("sent") == n, report
    assert emulator.broker.counts("dst")["active"] == n  # the broker's own count
    assert not core.copy_record("plain", "dst", connection=cs).exists()  # finished: no record left


def test_a_copy_refused_before_it_sends_anything_leaves_no_record(emulator: Emulator) -> None:
    """No such target: nothing was taken from the source, so there is nothing to resume and no
    record on disk (a record would make the same command say it resumes)."""
    cs = emulator.connection_string
    core.send("plain", ["a", "b"], connection=cs).raise_for_failures()
    with pytest.raises(core.EntityNotFoundError):
        core.copy("plain", "nosuch", connection=cs)
    assert not core.copy_record("plain", "nosuch", connection=cs).exists()
    assert core.copy_resume_point("plain", "nosuch", connection=cs) is None
    assert emulator.broker.counts("plain")["active"] == 2


def test_a_copy_whose_source_was_created_again_since_it_stopped_copies_the_new_one_from_the_start(
    emulator: Emulator,
) -> None:
    """An interrupted copy's record, then its source deleted and created again with other messages:
    the new queue numbers them from 1 again, so resuming past the record's sequence number skipped
    the first of them (keyed by names alone, it copied only those numbered after what the old queue
    had copied). The record keeps both entities' creation times (the administration API's CreatedAt,
    which the emulator now answers per entity as Service Bus does): the same copy starts afresh and
    says why."""
    cs = emulator.connection_string
    n = 600
    core.send("plain", ({"body": f"old-{i:04d}"} for i in range(n)), connection=cs).raise_for_failures()
    emulator.latency_ms = 50
    hook = InterruptAtFirstProgress()
    with answered(hook):
        stopped = core.copy("plain", "dst", max_in_flight=1, progress=hook, connection=cs)
    emulator.latency_ms = 0
    assert core.interrupted(stopped), stopped  # its Report, the record saved: no waiting for either
    recorded = core.copy_resume_point("plain", "dst", connection=cs)
    assert recorded is not None and recorded.pending and 0 < recorded.done < n, recorded
    created = json.loads(core.copy_record("plain", "dst", connection=cs).read_text())["created"]
    assert created["source"] and created["target"], created  # both read from the administration API

    core.delete_entity("plain", connection=cs)
    core.create_entity("plain", connection=cs)
    core.send("plain", ({"body": f"new-{i:04d}"} for i in range(n)), connection=cs).raise_for_failures()
    assert core.copy_resume_point("plain", "dst", connection=cs) is None  # a record of another queue
    report = core.copy("plain", "dst", connection=cs)
    assert report.ok and report.count("sent") == n, report
    assert any("deleted and created again" in note for note in report.notes), report.notes
    new = [r["body_text"] for r in core.scan_records("dst", connection=cs) if r["body_text"].startswith("new-")]
    assert sorted(new) == [f"new-{i:04d}" for i in range(n)]  # every message of the new queue, once
    assert not core.copy_record("plain", "dst", connection=cs).exists()


def test_an_unreadable_copy_record_is_said_in_the_log_and_the_report(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """A copy record cut short (a full disk) cannot say how far the copy got: the copy starts from the
    beginning, and says so as a warning naming the file and in its Report, since what it had copied
    is sent again (it was logged at INFO only)."""
    cs = emulator.connection_string
    core.send("plain", ({"body": f"m-{i}"} for i in range(3)), connection=cs).raise_for_failures()
    record = core.copy_record("plain", "dst", connection=cs)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text('{"progress": {"done": 1', encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="sbnotebook"):
        report = core.copy("plain", "dst", connection=cs)
    assert report.ok and report.count("sent") == 3, report
    assert [r["body_text"] for r in core.scan_records("dst", connection=cs)] == ["m-0", "m-1", "m-2"]
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(record) in line and "could not be read" in line for line in said), said
    assert any("could not be read" in note and "from the beginning" in note for note in report.notes), report.notes


@pytest.mark.timeout(120)
def test_a_copy_of_a_source_numbered_with_gaps_sends_each_message_once(emulator: Emulator) -> None:
    """The copy peeks ahead from where a peek would end if the numbers ran on without gaps
    (copy/read_ahead.py): where they do not, the answers overlap, and what an earlier answer brought is
    not sent again. Two of every three messages are removed first, so each peek of 50 spans 150
    numbers; the target is read through the broker."""
    from azure.servicebus import ServiceBusClient

    cs = emulator.connection_string
    core.send("plain", [f"m{i}" for i in range(600)], connection=cs).raise_for_failures()
    with ServiceBusClient.from_connection_string(cs) as client, client.get_queue_receiver("plain") as receiver:
        removed = 0
        while removed < 400:
            for msg in receiver.receive_messages(max_message_count=100, max_wait_time=5):
                if int(str(msg)[1:]) % 3:  # the others stay, locked (given back, they would count deliveries)
                    receiver.complete_message(msg)
                    removed += 1
    report = core.copy("plain", "dst", resume=False, connection=cs)
    assert report.ok and report.count("sent") == 200, report
    assert 0 < report.stats["peak_held"] <= 2 * core.PAGE_SIZE
    broker = emulator.broker
    copies = broker.peek(broker.resolve_source("dst"), 1, 1000)
    bodies = [bytes(m.data.raw_body)[5:].decode() for m in copies]  # in the order the sends arrived (10 at once)
    assert len(bodies) == 200 and sorted(bodies) == sorted(f"m{i}" for i in range(0, 600, 3))
