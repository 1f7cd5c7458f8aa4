"""process() with a settlement policy, and the four deferral strategies."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from azure.servicebus import ServiceBusClient

from sbnotebook import core
from sbnotebook.core.operations import deferral
from sbnotebook.emulator import Emulator
from tests.helpers import drain
from tests.processes import start_cli_emulator
from tests.waiting import HANG, renewed_past_the_lock, wait_until


def test_process_settles_by_outcome_after_the_work(emulator: Emulator, client: ServiceBusClient) -> None:
    cs = emulator.connection_string
    core.send("q", [{"kind": k} for k in ["ok", "skip", "bad", "boom", "retry", "ok"]], connection=cs)
    seen: list[str] = []

    def handler(record: dict) -> object:  # type: ignore[type-arg]
        kind = json.loads(record["body_text"])["kind"]
        seen.append(kind)
        if kind == "skip":
            return core.Skip
        if kind == "bad":
            return core.DeadLetter("Invalid", "kind is bad")
        if kind == "boom":
            raise ValueError("handler crashed")
        if kind == "retry" and record["delivery_count"] == 1:  # its first delivery
            return core.Retry
        return core.Done

    report = core.process("q", handler, connection=cs)
    assert (report.count("completed"), report.count("skipped"), report.count("dead_lettered")) == (3, 1, 1)
    assert report.stats["handler_errors"] >= 1  # once per delivery of "boom"
    assert any("handler crashed" in (o.error or "") for o in report)
    assert report.count("abandoned") >= 2  # the crash and the first retry went back to the queue
    # Every message was settled as the policy says, but a handler crashed: the report is not ok.
    assert not report.ok and "handler error(s), settled by the policy (abandon)" in report.summary()
    assert "ValueError: handler crashed" in report.summary()
    # The crashing message was abandoned each time it came back, until MaxDeliveryCount (10) sent it to the DLQ.
    counts = emulator.broker.counts("q")
    assert (counts["active"], counts["dead_letter"]) == (0, 2)
    reasons = sorted(r["dead_letter_reason"] for r in core.peek("q/$deadletterqueue", connection=cs))
    assert reasons == ["Invalid", "MaxDeliveryCountExceeded"]


def test_a_handler_that_returns_nonsense_is_not_ok(emulator: Emulator, client: ServiceBusClient) -> None:
    """An instance where the class is expected (``Done()``) is abandoned, and the report says so
    (it read "5 abandoned" with ok True: tutorial 07 dead-lettered its orders that way unseen)."""
    cs = emulator.connection_string
    core.send("q", [f"m{i}" for i in range(5)], connection=cs)
    report = core.process("q", lambda r: core.Done(), max_messages=5, wait_seconds=30, connection=cs)
    assert report.count("abandoned") == 5 and not report.ok
    assert "5 handler error(s)" in report.summary() and "handler returned" in report.summary()
    with pytest.raises(core.SbError, match="handler returned"):
        report.raise_for_failures()
    # The broker agrees: all five are back in the queue, after five deliveries in all (an abandoned
    # message comes back at once, so a later receive may take one of them again).
    with client.get_queue_receiver("q") as r:
        peeked = r.peek_messages(max_message_count=10)
    assert len(peeked) == 5 and sum(m.delivery_count or 0 for m in peeked) == 5


def test_errors_can_dead_letter_to_a_chosen_destination(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("q", ["poison"], connection=cs)

    def handler(record: dict) -> None:  # type: ignore[type-arg]
        raise RuntimeError("cannot parse")

    report = core.process(
        "q", handler, policy=core.Policy(on_error="dead_letter", dead_letter_to="fwd-dst"), connection=cs
    )
    assert report.count("dead_lettered") == 1 and not report.ok  # dead-lettered as asked; the handler failed
    (moved,) = core.peek("fwd-dst", connection=cs).records
    props = moved["application_properties"]
    assert (
        props["sbnotebook-fault-reason"] == "HandlerError" and "cannot parse" in props["sbnotebook-fault-description"]
    )
    assert props["sbnotebook-fault-source"] == "q"
    assert emulator.broker.counts("q") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}


def test_stop_abandons_and_stops(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("q", [f"m{i}" for i in range(10)], connection=cs)
    report = core.process("q", lambda r: core.Stop if r["body_text"] == "m0" else None, max_in_flight=1, connection=cs)
    assert report.stats["stopped"] and report.count("completed") == 0 and report.count("abandoned") == 1
    assert emulator.broker.counts("q")["active"] == 10


@pytest.mark.servicebus_clock("manual")
def test_locks_are_renewed_while_slow_handlers_run(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("short", ["slow"], connection=cs)  # LockDuration PT1S
    # The handler takes 2.4 s of the broker's time, held only by renewals (tests/waiting.py).
    report = core.process("short", lambda r: renewed_past_the_lock(emulator, lock=1.0), connection=cs)
    assert report.count("completed") == 1 and report.count("lock_lost") == 0


@pytest.mark.servicebus_clock("manual")
def test_let_the_lock_lapse(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("short", ["later"], connection=cs)
    with core.receive("short", max_messages=1, connection=cs) as batch:
        (seq,) = deferral.let_lock_lapse(batch)
        emulator.advance(1.6)  # past the 1 s lock: it lapses, as nothing renews it
    (again,) = core.peek("short", connection=cs).records
    assert again["sequence_number"] == seq and again["delivery_count"] == 1


def test_wait_then_abandon_does_not_block(emulator: Emulator) -> None:
    """On q (30 s lock): the hold does not hang on a renewal being on time (the renewal has tests of
    its own). Not timed: returning at once is returning with the abandon still to come."""
    cs = emulator.connection_string
    core.send("q", ["held"], connection=cs)
    with core.receive("q", max_messages=1, connection=cs) as batch:
        future = deferral.wait_then_abandon(batch, seconds=3)
        assert not future.done()  # returned at once (3 s is only how long the test then waits)
        assert emulator.broker.counts("q")["active"] == 1 and emulator.broker._locks  # still held
        (outcome,) = future.result(HANG)
        assert outcome.outcome == "abandoned"
    (again,) = core.peek("q", connection=cs).records
    assert again["delivery_count"] == 1


def test_defer_with_reminder_and_fetch(emulator: Emulator, client: ServiceBusClient) -> None:
    cs = emulator.connection_string
    core.send("q", ["needs later"], connection=cs)
    with core.receive("q", max_messages=1, connection=cs) as batch:
        (seq,) = deferral.defer_with_reminder(batch, remind_at=dt.timedelta(seconds=1))
    assert emulator.broker.counts("q")["deferred"] == 1
    wait_until(lambda: emulator.broker.counts("q")["active"] == 1)
    with core.receive("q", max_messages=1, connection=cs) as reminders:
        (reminder,) = reminders.records
        assert deferral.is_reminder(reminder)
        with deferral.fetch_reminded(reminder, connection=cs) as original:
            assert original.records[0]["sequence_number"] == seq
            assert original.records[0]["body_text"] == "needs later"
            assert original.complete().outcomes[0].outcome == "completed"
        reminders.complete()
    assert emulator.broker.counts("q") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}


def test_defer_with_reminder_to_a_missing_target_defers_nothing(emulator: Emulator) -> None:
    """The reminder target is checked first: it deferred, then raised, and the caller never got the
    sequence numbers (a deferred message can be fetched only by its number)."""
    cs = emulator.connection_string
    core.send("q", ["a", "b"], connection=cs)
    with core.receive("q", max_messages=2, wait_seconds=5, connection=cs) as batch:
        with pytest.raises(core.EntityNotFoundError):
            deferral.defer_with_reminder(batch, remind_at=dt.timedelta(hours=1), reminder_entity="missing")
        assert emulator.broker.counts("q")["deferred"] == 0
        assert batch.unsettled == [0, 1]  # still locked, untouched
        assert batch.complete().count("completed") == 2


def test_reminders_that_cannot_be_scheduled_raise_with_the_deferred_numbers(emulator: Emulator) -> None:
    """The target exists, but scheduling fails after the deferral: the error carries every deferred
    sequence number (attribute and message), and they fetch the messages."""
    cs = emulator.connection_string
    core.send("q", ["a", "b", "c"], connection=cs)
    emulator.broker.faults.reject_sends("dl-target", 10, "quota-exceeded")
    with core.receive("q", max_messages=3, wait_seconds=5, connection=cs) as batch:
        numbers = sorted(int(m.sequence_number) for m in batch.messages)
        with pytest.raises(core.PartlyDoneError) as caught:
            deferral.defer_with_reminder(batch, remind_at=dt.timedelta(hours=1), reminder_entity="dl-target")
    error = caught.value
    assert sorted(error.sequence_numbers) == numbers
    assert all(str(n) in str(error) for n in numbers) and "were deferred" in str(error)
    assert isinstance(error.cause, core.SbError) and "maximum entity size" in error.cause.message
    assert emulator.broker.counts("q")["deferred"] == 3 and emulator.broker.counts("dl-target")["scheduled"] == 0
    with core.receive_deferred("q", error.sequence_numbers, connection=cs) as fetched:
        assert fetched.complete().count("completed") == 3
    assert emulator.broker.counts("q")["deferred"] == 0


def test_resubmit_scheduled_with_a_limit(emulator: Emulator, client: ServiceBusClient) -> None:
    cs = emulator.connection_string
    core.send("q", ["flaky"], connection=cs)
    for attempt in range(3):
        with core.receive("q", max_messages=1, wait_seconds=5, connection=cs) as batch:
            assert len(batch) == 1
            (outcome,) = deferral.resubmit_scheduled(batch, delay=dt.timedelta(seconds=2), max_resubmits=2)
            assert outcome.ok
            if attempt < 2:
                assert outcome.outcome == "completed"
                assert emulator.broker.counts("q")["scheduled"] == 1  # the clone waits for its time
            else:
                assert outcome.outcome == "dead_lettered"
    (dead,) = core.peek("q/$deadletterqueue", connection=cs).records
    assert dead["dead_letter_reason"] == "MaxResubmitsExceeded"
    assert dead["application_properties"]["sbnotebook-resubmit-count"] == "2"
    assert drain(client, "q", wait=0.5) == []


def test_multi_step_operations_check_their_target_before_changing_anything(emulator: Emulator) -> None:
    """process with dead_letter_to= a missing queue completed the good messages, then raised at the
    first bad one and the report of what it had done was lost; resubmit_scheduled dead-lettered the
    messages past their limit, then raised. Both now refuse before touching a message."""
    cs = emulator.connection_string
    core.send("q", ["good", "bad", "good"], connection=cs)

    def handler(record: dict) -> None:  # type: ignore[type-arg]
        if record["body_text"] == "bad":
            raise RuntimeError("cannot parse")

    policy = core.Policy(on_error="dead_letter", dead_letter_to="missing")
    with pytest.raises(core.EntityNotFoundError):
        core.process("q", handler, policy=policy, connection=cs)
    assert emulator.broker.counts("q")["active"] == 3  # nothing completed, nothing received

    core.send("once", [{"body": "tired", "application_properties": {"sbnotebook-resubmit-count": 5}}], connection=cs)
    with core.receive("once", max_messages=1, wait_seconds=5, connection=cs) as batch:
        with pytest.raises(core.EntityNotFoundError):
            deferral.resubmit_scheduled(batch, delay=dt.timedelta(seconds=1), max_resubmits=5, target="missing")
        assert batch.unsettled == [0] and emulator.broker.counts("once")["dead_letter"] == 0


@pytest.mark.timeout(120)
def test_a_process_stopped_by_a_broker_gone_for_good_returns_what_it_did() -> None:
    """The broker dies in the middle and stays down: the messages settled before are the answer,
    with one failed outcome saying where it stopped (it raised, and the report was lost)."""
    proc, cs = start_cli_emulator("--port", "0", "--admin-port", "0")
    try:
        conn = core.connect(cs, warm=False)
        core.send("orders", [f"m{i}" for i in range(30)], connection=conn)
        seen: list[str] = []

        def handler(record: dict) -> None:  # type: ignore[type-arg]
            seen.append(record["body_text"])
            if len(seen) == 9 and proc.poll() is None:  # the fourth batch of 3: three batches settled
                proc.kill()
                proc.wait()

        report = core.process("orders", handler, max_in_flight=3, wait_seconds=1, connection=conn)
    finally:
        core.close_all()
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
    assert report.count("completed") >= 6 and not report.ok, report
    assert any(o.index is None and "stopped after" in (o.error or "") for o in report.failures), report
    assert any(n.startswith("stopped early") for n in report.notes)
