"""A resubmit of 1,000 dead letters interrupted (a kernel interrupt, a cancelled task) at a chosen
state of the broker: before any copy, between a batch's copies confirmed and its originals
completed, after 300 copies. Each run returns its Report instead of raising; the broker, read
through the SDK, holds every message exactly once (the queue or its dead-letter queue), none
locked, and the Report's counts are the broker's; ``resume=True`` then moves the rest, once.

The interrupt lands at a state of the broker, not after a time (tests/interrupting.py), and the
emulator's clock is manual: no lock lapses, so a lock given back is the run's doing."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from sbnotebook import core
from sbnotebook.core.files.jsonl import write_jsonl
from sbnotebook.core.operations.copies import ORIGINAL_ID
from sbnotebook.emulator import Emulator
from tests.helpers import QuickCloseClient
from tests.interrupting import (
    SEND_LOG,
    TOPOLOGY,
    InterruptWhen,
    N,
    between_copy_and_complete,
    copies_at_least,
    dead_letters,
    exactly_once,
    overlap,
    peek_all,
    receiving_before_any_copy,
    where_each_is,
)
from tests.waiting import wait_until

DLQ = "q/$deadletterqueue"


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(TOPOLOGY, clock="manual") as emu:
        yield emu
        core.close_all()


def test_the_checks_fail_on_a_message_lost_doubled_or_locked(emulator: Emulator) -> None:
    """The checks below, on broken states: a message in both places, one gone, one locked."""
    dead_letters(emulator, 4)
    exactly_once(where_each_is(emulator), 4)
    with QuickCloseClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender("q") as s:  # m-0 copied (in both places now)
            s.send_messages(ServiceBusMessage("0000", application_properties={ORIGINAL_ID: "m-0"}))
        with pytest.raises(AssertionError):
            exactly_once(where_each_is(emulator), 4)
        with client.get_queue_receiver("q") as r:  # ... and gone from both
            r.complete_message(r.receive_messages(max_wait_time=5)[0])
        with client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as r:
            r.complete_message(r.receive_messages(max_wait_time=5)[0])
        with pytest.raises(AssertionError):
            exactly_once(where_each_is(emulator), 4)
        with client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as r:
            assert r.receive_messages(max_wait_time=5)  # held while the places are read
            with pytest.raises(AssertionError, match="locked"):
                where_each_is(emulator)


POINTS: dict[str, Callable[[], Callable[[Any], bool]]] = {
    "receiving, before any copy": lambda: receiving_before_any_copy("q"),
    "between copies confirmed and originals completed": lambda: between_copy_and_complete("q", N),
    "after 300 copies": lambda: copies_at_least("q", 300),
}


@pytest.mark.parametrize("point", list(POINTS))
def test_a_resubmit_interrupted_returns_its_report_leaves_each_message_once_and_resumes(
    emulator: Emulator, point: str
) -> None:
    dead_letters(emulator)
    cs = emulator.connection_string
    with InterruptWhen(emulator, POINTS[point]()) as interrupt:
        report = core.resubmit(DLQ, connection=cs)  # returns: no KeyboardInterrupt
    assert interrupt.fired and interrupt.acknowledged
    assert core.interrupted(report) and not report.ok, report
    assert "resume=True" in str(report)
    # None locked: each batch was finished or given back (released: the frames left before the call
    # returned; the broker applies them as it reads them). The clock is manual: no lock lapses.
    wait_until(lambda: emulator.broker._locks == {}, timeout=30, interval=0.01)
    places = where_each_is(emulator)
    exactly_once(places)
    moved = sum(places["queue"].values())
    assert report.count("resubmitted") == moved and report.total == moved, report  # the broker's counts
    assert overlap(emulator.broker, "q", N) == 0
    if point == "receiving, before any copy":
        assert moved == 0
    if point == "between copies confirmed and originals completed":
        assert moved >= 50  # that batch's originals were completed, not given back
    assert moved < N  # stopped before the end
    assert core.resubmit_resume_point(DLQ, connection=cs).moved == moved  # type: ignore[union-attr]

    rest = core.resubmit(DLQ, resume=True, connection=cs)
    assert rest.ok and rest.count("resubmitted") == N - moved, rest
    assert f"resumed: {moved} moved before" in rest.notes
    places = where_each_is(emulator)
    exactly_once(places)
    assert sum(places["queue"].values()) == N and not places["dlq"]
    assert core.resubmit_resume_point(DLQ, connection=cs) is None  # finished: nothing to resume
    with pytest.raises(core.InvalidInputError, match="Nothing to resume"):
        core.resubmit(DLQ, resume=True, connection=cs)


def _bodies(emulator: Emulator, queue: str) -> Counter[str]:
    with QuickCloseClient.from_connection_string(emulator.connection_string) as client:
        return Counter(str(m) for m in peek_all(client, queue))


def test_an_import_interrupted_returns_its_report_and_the_same_import_sends_each_line_once(
    emulator: Emulator, tmp_path: Path
) -> None:
    """Interrupted once 300 lines are in the target: the sends in flight are confirmed before the
    Report returns, so the marker records each line that arrived, and the same import again sends
    only the others (plain has no duplicate detection: a line sent twice would be there twice)."""
    cs = emulator.connection_string
    export = tmp_path / "in.jsonl"
    write_jsonl(({"body": f"{i:04d}".encode(), "body_text": f"{i:04d}"} for i in range(N)), export)
    with InterruptWhen(emulator, copies_at_least("plain", 300), ack=SEND_LOG) as interrupt:
        report = core.import_jsonl("plain", export, max_in_flight=1, connection=cs)  # one send (of 500) at a time
    assert interrupt.fired and interrupt.acknowledged
    sent = emulator.broker.counts("plain")["active"]
    assert core.interrupted(report) and report.count("sent") == sent < N, report
    assert "the same import again sends what is left" in str(report)
    again = core.import_jsonl("plain", export, connection=cs)
    assert again.ok and again.count("sent") == N - sent, again
    assert _bodies(emulator, "plain") == Counter(f"{i:04d}" for i in range(N))  # each line once


def test_a_copy_interrupted_returns_its_report_and_the_same_copy_copies_each_message_once(emulator: Emulator) -> None:
    """A copy of 1,000 dead letters (peeked: the source stays as it is) interrupted once 300 copies
    are in the target: its Report counts what the target confirmed, and the same copy again sends
    only the others."""
    dead_letters(emulator)
    cs = emulator.connection_string
    with InterruptWhen(emulator, copies_at_least("plain", 300), ack=SEND_LOG) as interrupt:
        report = core.copy(DLQ, "plain", max_in_flight=2, connection=cs)
    assert interrupt.fired and interrupt.acknowledged
    copied = emulator.broker.counts("plain")["active"]
    assert core.interrupted(report) and report.count("sent") == copied < N, report
    again = core.copy(DLQ, "plain", connection=cs)
    assert again.ok and again.count("sent") == N - copied, again
    assert _bodies(emulator, "plain") == Counter(f"{i:04d}" for i in range(N))  # each message once
    assert emulator.broker.counts("q")["dead_letter"] == N  # the source as it was


def test_a_cancelled_task_awaiting_aresubmit_gets_its_report(emulator: Emulator) -> None:
    """The async form, awaited on another loop (a notebook's) and cancelled between a batch's copies
    confirmed and its originals completed: the batches in flight end, the ``await`` returns the
    Report (no CancelledError) and the task is not left cancelling."""
    dead_letters(emulator)
    cs = emulator.connection_string

    async def cancelled() -> tuple[core.Report, int, bool]:
        task = asyncio.create_task(core.aresubmit(DLQ, connection=cs))
        loop = asyncio.get_running_loop()
        cancel = lambda: loop.call_soon_threadsafe(task.cancel)  # noqa: E731
        with InterruptWhen(emulator, between_copy_and_complete("q", N), interrupt=cancel) as interrupt:
            report = await task
        return report, task.cancelling(), interrupt.fired and interrupt.acknowledged

    report, cancelling, cancelled_there = asyncio.run(cancelled())
    assert cancelled_there and core.interrupted(report) and cancelling == 0, report
    wait_until(lambda: emulator.broker._locks == {}, timeout=30, interval=0.01)
    places = where_each_is(emulator)
    exactly_once(places)
    assert report.count("resubmitted") == sum(places["queue"].values()) >= 50


def test_a_copy_then_complete_cancelled_with_its_send_on_the_way_completes_the_originals_copied(
    emulator: Emulator,
) -> None:
    """``acopy_then_complete``'s task cancelled (the loop closing, or a caller's cancel) while its
    copies are on their way: the send's outcomes are known (the pipeline ends what is in flight), so
    each original whose copy was confirmed is completed, not given back: no message in both places."""
    dead_letters(emulator, 10)
    cs = emulator.connection_string
    conn = core.live_connection(cs)
    batch = core.receive(DLQ, max_messages=10, wait_seconds=5, connection=cs)
    assert len(batch.messages) == 10
    copies = [(i, core.copy_message(m, source=DLQ)) for i, m in enumerate(batch.messages)]
    running: dict[str, asyncio.Task[Any]] = {}

    async def copy_then_complete() -> core.Report:
        running["task"] = asyncio.current_task()  # type: ignore[assignment]
        return await core.acopy_then_complete(batch, copies, "q")

    done = conn.spawn(copy_then_complete())
    cancel = lambda: conn.loop.call_soon_threadsafe(running["task"].cancel)  # noqa: E731
    with InterruptWhen(emulator, copies_at_least("q", 10), ack=SEND_LOG, interrupt=cancel) as interrupt:
        report = done.result(timeout=60)
    assert interrupt.fired and interrupt.acknowledged
    assert report.count("completed") == 10 and report.ok, report
    assert emulator.broker.counts("q") == {**emulator.broker.counts("q"), "active": 10, "dead_letter": 0}
    batch.close()


def test_originals_whose_copies_are_in_the_target_are_completed_by_the_next_run_not_copied_again(
    emulator: Emulator,
) -> None:
    """The one state an interrupted run leaves in two places: a copy confirmed whose original could
    not be completed (its lock lost as the completion came: a service update). The run reports each
    ``duplicated`` and its record names it; the next run, not even resumed, completes it without
    another copy. Without the record, those copies would be sent again (q has no duplicate detection)."""
    dead_letters(emulator)
    cs = emulator.connection_string
    between = between_copy_and_complete("q", N)

    def locks_lost_there(broker: Any) -> bool:
        if not between(broker):
            return False
        broker.lose_locks("q")  # every lock on q and its DLQ: each completion on its way fails
        return True

    with InterruptWhen(emulator, locks_lost_there) as interrupt:
        report = core.resubmit(DLQ, connection=cs)
    assert interrupt.fired and interrupt.acknowledged
    wait_until(lambda: emulator.broker._locks == {}, timeout=30, interval=0.01)
    doubled = overlap(emulator.broker, "q", N)
    assert doubled >= 50 and report.count("duplicated") == doubled, report  # in both places, said so
    recorded = core.resubmit_resume_point(DLQ, connection=cs)
    assert recorded is not None and len(recorded.copied) == doubled

    rest = core.resubmit(DLQ, connection=cs)
    assert rest.ok and rest.count("resubmitted") == N - report.count("resubmitted"), rest
    places = where_each_is(emulator)
    exactly_once(places)  # the doubled ones completed, not copied again
    assert sum(places["queue"].values()) == N and not places["dlq"]
    assert core.resubmit_resume_point(DLQ, connection=cs) is None


def test_a_resumed_resubmit_counts_max_messages_over_the_whole_run(emulator: Emulator) -> None:
    """Asked for 600 and interrupted after 300 copies, the resumed run moves what is left of the 600,
    not 600 more: the run, not each call, is what ``max_messages`` bounds."""
    dead_letters(emulator)
    cs = emulator.connection_string
    with InterruptWhen(emulator, copies_at_least("q", 300)):
        first = core.resubmit(DLQ, max_messages=600, connection=cs)
    assert core.interrupted(first)
    moved = first.count("resubmitted")
    rest = core.resubmit(DLQ, max_messages=600, resume=True, connection=cs)
    assert rest.ok and rest.count("resubmitted") == 600 - moved, rest
    wait_until(lambda: emulator.broker._locks == {}, timeout=30, interval=0.01)
    places = where_each_is(emulator)
    exactly_once(places)
    assert sum(places["queue"].values()) == 600 and sum(places["dlq"].values()) == N - 600


def test_a_cancelled_task_awaiting_acopy_gets_its_report_and_the_same_copy_sends_the_rest_once(
    emulator: Emulator,
) -> None:
    """``acopy`` awaited on another loop (a notebook's) runs there; its sends run on the target's
    loop, and answer the cancellation from there: the copies in flight confirmed and recorded, the
    ``await`` returns the Report, and the same copy again sends only what is left."""
    dead_letters(emulator)
    cs = emulator.connection_string

    async def cancelled() -> tuple[core.Report, bool]:
        task = asyncio.create_task(core.acopy(DLQ, "plain", max_in_flight=2, connection=cs))
        loop = asyncio.get_running_loop()
        cancel = lambda: loop.call_soon_threadsafe(task.cancel)  # noqa: E731
        with InterruptWhen(emulator, copies_at_least("plain", 300), ack=SEND_LOG, interrupt=cancel) as interrupt:
            report = await task
        return report, interrupt.fired and interrupt.acknowledged

    report, cancelled_there = asyncio.run(cancelled())
    copied = emulator.broker.counts("plain")["active"]
    assert cancelled_there and core.interrupted(report) and report.count("sent") == copied < N, report
    again = core.copy(DLQ, "plain", connection=cs)
    assert again.ok and again.count("sent") == N - copied, again
    assert _bodies(emulator, "plain") == Counter(f"{i:04d}" for i in range(N))  # each message once


def test_a_resubmit_at_a_rate_interrupted_leaves_each_message_once_and_resumes(emulator: Emulator) -> None:
    """At a rate, batches wait for their tokens in hand: interrupted once 100 copies are in q, the
    batch waiting goes back whole, those on their way finish; each message once, none locked."""
    dead_letters(emulator)
    cs = emulator.connection_string
    with InterruptWhen(emulator, copies_at_least("q", 100)) as interrupt:
        report = core.resubmit(DLQ, rate="500/s", connection=cs)
    assert interrupt.fired and interrupt.acknowledged and core.interrupted(report), report
    wait_until(lambda: emulator.broker._locks == {}, timeout=30, interval=0.01)
    places = where_each_is(emulator)
    exactly_once(places)
    moved = sum(places["queue"].values())
    assert report.count("resubmitted") == moved < N, report
    rest = core.resubmit(DLQ, resume=True, rate="500/s", connection=cs)
    assert rest.ok and rest.count("resubmitted") == N - moved, rest
    exactly_once(where_each_is(emulator))


def test_a_move_cancelled_before_it_began_gives_its_batch_back_whole(emulator: Emulator) -> None:
    """A worker hands each batch to a move of its own (a task) while it receives the next. Cancelled
    before its first step (the loop closing cancels every task), that move never ran its own give-back:
    the worker gives the batch back (released: no delivery counted), no copy sent."""
    from sbnotebook.core.entities import EntityPath
    from sbnotebook.core.incidents.resubmit import workers as rb
    from sbnotebook.core.operations.receive import receive_batch
    from sbnotebook.core.outcome import Report

    core.send("q", [f"m{i}" for i in range(5)], connection=emulator.connection_string)
    live = core.connect(emulator.connection_string, warm=False)
    src, dst = EntityPath.parse("q"), EntityPath.parse("plain")
    job = rb.Job(live, src, dst, None, False, 5, 1)
    run = rb.Run(Report("resubmit", "q", "plain"), None, None, None)

    async def cancelled_before_it_began() -> bool:
        batch = await receive_batch(live, src, count=5, wait=3, max_in_flight=1)
        run.claimed = len(batch.messages)
        mover = rb._Mover(job, run)
        mover.start(batch)
        assert mover._task is not None
        mover._task.cancel()  # before the move's first step
        with pytest.raises(asyncio.CancelledError):
            await mover.ended()
        return not batch.unsettled

    assert live.run(cancelled_before_it_began())
    wait_until(lambda: emulator.broker._locks == {}, timeout=30, interval=0.01)
    assert emulator.broker.counts("q")["active"] == 5 and emulator.broker.counts("plain")["active"] == 0
    assert run.claimed == 0 and run.moved == 0
    events = [e.event for e in emulator.broker.journey.events() if e.entity == "q"]
    assert events.count("released") == 5 and "lock_expired" not in events, events
