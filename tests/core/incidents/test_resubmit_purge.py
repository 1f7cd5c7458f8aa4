"""Resubmission (copy first, complete second), purge, and counts."""

from __future__ import annotations

import datetime as dt
import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from sbnotebook import core
from sbnotebook.core import EntityNameError
from sbnotebook.core.incidents import leftovers
from sbnotebook.emulator import Emulator
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import lose_the_session_lock_after_two_deferred, one_active_three_deferred_in_session_d
from tests.processes import free_port

purge_module = importlib.import_module("sbnotebook.core.incidents.purge.api")  # core.purge is the function
run_module = importlib.import_module("sbnotebook.core.incidents.resubmit.run")  # one run of a resubmit


def _dead_letter_all(client: ServiceBusClient, queue: str, n: int, reason: str = "Bad") -> None:
    with client.get_queue_receiver(queue, max_wait_time=3) as r:
        done = 0
        while done < n:
            for m in r.receive_messages(max_message_count=n - done, max_wait_time=3):
                r.dead_letter_message(m, reason=reason, error_description="test")
                done += 1


def test_resubmit_from_dlq_keeps_fidelity_and_loses_nothing(emulator: Emulator, client: ServiceBusClient) -> None:
    cs = emulator.connection_string
    with client.get_queue_sender("q") as s:
        s.send_messages(
            [
                ServiceBusMessage(
                    bytes(range(256)),
                    content_type="application/octet-stream",
                    subject="sub",
                    correlation_id="corr",
                    message_id=f"orig-{i}",
                    application_properties={"tenant": "a", "n": i},
                )
                for i in range(3)
            ]
        )
    _dead_letter_all(client, "q", 3)
    report = core.resubmit("q/$deadletterqueue", connection=cs)
    assert report.ok and report.count("resubmitted") == 3 and "q/$deadletterqueue -> q" in repr(report)
    assert emulator.broker.counts("q") == {"active": 3, "deferred": 0, "scheduled": 0, "dead_letter": 0}
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        got = r.receive_messages(max_message_count=3, max_wait_time=3)
        for i, m in enumerate(sorted(got, key=lambda m: m.application_properties[b"n"])):
            assert b"".join(m.body) == bytes(range(256))  # binary body intact
            assert (m.content_type, m.subject, m.correlation_id) == ("application/octet-stream", "sub", "corr")
            props = {k.decode(): v for k, v in m.application_properties.items()}
            assert props["tenant"] == b"a" and props["n"] == i
            assert props["sbnotebook-resubmit-count"] == 1
            assert props["sbnotebook-original-message-id"] == f"orig-{i}".encode()
            assert "DeadLetterReason" not in props and "DeadLetterErrorDescription" not in props
            assert m.message_id != f"orig-{i}"  # fresh id: duplicate detection would drop the copy otherwise
            r.complete_message(m)


def test_a_worker_receives_its_next_batch_while_it_moves_one_and_never_holds_more_than_two(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """One worker, batches of 5: the broker delivers a batch before it completes the batch before
    (the receive rides beside the move), and never holds more than two batches locked."""
    with client.get_queue_sender("q") as s:
        s.send_messages([ServiceBusMessage(f"m{i}") for i in range(40)])
    _dead_letter_all(client, "q", 40)
    report = core.resubmit("q/$deadletterqueue", max_in_flight=1, batch_size=5, connection=emulator.connection_string)
    assert report.ok and report.count("resubmitted") == 40, report
    locked: set[int] = set()
    most = 0
    for e in emulator.broker.journey.events():
        if e.entity.lower() != "q/$deadletterqueue":
            continue
        if e.event == "delivered":
            locked.add(e.sequence_number)
            most = max(most, len(locked))
        elif e.event in ("completed", "released", "abandoned", "lock_expired"):
            locked.discard(e.sequence_number)
    assert not locked and most == 10, most  # two batches of 5 at a moment: never three, and not one


def test_keep_message_id_into_a_deduplicating_queue(emulator: Emulator, client: ServiceBusClient) -> None:
    cs = emulator.connection_string
    with client.get_queue_sender("dedup") as s:
        s.send_messages(ServiceBusMessage("x", message_id="same-id"))
    _dead_letter_all(client, "dedup", 1)
    kept = core.resubmit("dedup/$deadletterqueue", keep_message_id=True, connection=cs)
    assert kept.count("resubmitted") == 1
    assert emulator.broker.counts("dedup")["active"] == 0  # dropped by duplicate detection, as Service Bus does


def test_filtered_bulk_fix_and_resubmit(emulator: Emulator, client: ServiceBusClient) -> None:
    cs = emulator.connection_string
    core.send("q", [{"order": i, "qty": -1 if i % 2 else 1} for i in range(6)], connection=cs)
    _dead_letter_all(client, "q", 6)

    def fix(record: dict) -> dict:  # type: ignore[type-arg]
        body = json.loads(record["body_text"])
        body["qty"] = abs(body["qty"])
        record["body_text"] = json.dumps(body)
        record["application_properties"]["fixed"] = "yes"
        return record

    report = core.resubmit(
        "q/$deadletterqueue",
        where=lambda r: json.loads(r["body_text"])["qty"] < 0,
        edit=fix,
        connection=cs,
    )
    assert report.count("resubmitted") == 3 and report.ok
    active = core.peek("q", connection=cs).records
    assert sorted(json.loads(r["body_text"])["order"] for r in active) == [1, 3, 5]
    assert all(json.loads(r["body_text"])["qty"] == 1 and r["application_properties"]["fixed"] == "yes" for r in active)
    left = core.peek("q/$deadletterqueue", connection=cs).records
    assert sorted(json.loads(r["body_text"])["order"] for r in left) == [0, 2, 4]
    assert all(r["delivery_count"] == 0 for r in left)  # the unselected were not counted as deliveries


def test_subscription_dlq_needs_a_safe_target(emulator: Emulator, client: ServiceBusClient) -> None:
    cs = emulator.connection_string
    with pytest.raises(EntityNameError, match="every subscription"):
        core.resubmit("t/subscriptions/all/$deadletterqueue", connection=cs)
    with client.get_topic_sender("t") as s:
        s.send_messages(ServiceBusMessage("sub-dead"))
    with client.get_subscription_receiver("t", "all", max_wait_time=3) as r:
        (m,) = r.receive_messages(max_wait_time=3)
        r.dead_letter_message(m)
    report = core.resubmit("t/subscriptions/all/$deadletterqueue", target="fwd-dst", connection=cs)
    assert report.count("resubmitted") == 1
    assert [r["body_text"] for r in core.peek("fwd-dst", connection=cs)] == ["sub-dead"]


def test_failed_copy_leaves_the_original(emulator: Emulator, client: ServiceBusClient) -> None:
    cs = emulator.connection_string
    core.send("q", ["precious"], connection=cs)
    _dead_letter_all(client, "q", 1)
    emulator.reject_sends("q", 1, "quota-exceeded")
    report = core.resubmit("q/$deadletterqueue", connection=cs)
    assert report.count("resubmitted") == 0 and report.failed == 1 and report.failures[0].tracking_id
    assert [r["body_text"] for r in core.peek("q/$deadletterqueue", connection=cs)] == ["precious"]


def test_purge_removes_active_deferred_and_scheduled(emulator: Emulator, client: ServiceBusClient) -> None:
    cs = emulator.connection_string
    core.send("q", [f"m{i}" for i in range(1200)], connection=cs)
    core.schedule("q", ["later"], dt.datetime.now(dt.UTC) + dt.timedelta(hours=1), connection=cs)
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        for m in r.receive_messages(max_message_count=3, max_wait_time=3):
            r.defer_message(m)
    report = core.purge("q", connection=cs)
    assert report.count("purged") == 1197 + 3 + 1 and report.ok
    assert emulator.broker.counts("q") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}


def test_purge_finds_messages_that_are_only_scheduled_or_only_deferred(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    # purge first peeks once and stops if there is nothing: that peek must see these too
    cs = emulator.connection_string
    assert core.purge("q", connection=cs).outcomes == []
    core.schedule("q", ["later"], dt.datetime.now(dt.UTC) + dt.timedelta(hours=1), connection=cs)
    assert core.purge("q", connection=cs).count("purged") == 1
    core.send("q", ["not now"], connection=cs)
    with client.get_queue_receiver("q", max_wait_time=3) as r:
        (m,) = r.receive_messages(max_wait_time=3)
        r.defer_message(m)
    report = core.purge("q", scheduled=False, connection=cs)
    assert report.count("purged") == 1 and report.ok
    assert emulator.broker.counts("q") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}


def test_purge_counts_the_messages_still_on_their_way_when_it_stops(emulator: Emulator) -> None:
    """A purge's receivers keep credit out (prefetch). One that stops while the broker is still
    sending removes those messages too; the report must count every message removed."""
    cs = emulator.connection_string
    core.send("q", ["first"], connection=cs)
    core.peek("q", connection=cs)  # connected before the latency starts
    emulator.latency_ms = 1500  # longer than the purge's 1 s wait for a batch
    report = core.purge("q", deferred=False, scheduled=False, connection=cs)
    emulator.latency_ms = 0
    assert emulator.broker.counts("q")["active"] == 0
    assert report.count("purged") == 1 and report.ok


def test_a_session_enabled_queue_is_purged_session_by_session(emulator: Emulator, client: ServiceBusClient) -> None:
    """Service Bus refuses a receiver without a session on a session-enabled entity (peeks
    included), so the purge takes each session in turn; one another receiver holds is left as it
    is and reported, not waited for: its messages, as many as the broker still holds, are left,
    and no failed outcome stands for the session (it is no message)."""
    conn = core.connect(emulator.connection_string)
    in_an_hour = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    with client.get_queue_sender("sq60") as sender:
        sender.send_messages([ServiceBusMessage(b, session_id=s) for s, b in [("a", "a1"), ("a", "a2"), ("b", "b1")]])
        sender.send_messages([ServiceBusMessage("held", session_id="c")])
        sender.schedule_messages(ServiceBusMessage("b-later", session_id="b"), in_an_hour)
    with client.get_queue_receiver("sq60", session_id="a", max_wait_time=3) as r:
        (first,) = r.receive_messages(max_message_count=1, max_wait_time=3)
        r.defer_message(first)
    with client.get_queue_receiver("sq60", session_id="c", max_wait_time=1):  # another receiver holds c
        report = core.purge("sq60", connection=conn)
    assert report.count("purged") == 4  # a1 (deferred), a2, b1, b-later (cancelled); nothing of c
    # c's message, counted by the broker after the purge: one left outcome naming c, and the report
    # is not ok; every outcome is a message (5 sent, 4 purged, 1 left), none a session
    assert report.counts == {"purged": 4, "left": 1} and report.total == 5 and not report.ok
    (left,) = report.failures
    assert left.outcome == "left" and "held by another receiver ('c'" in str(left.error)
    assert any(n.startswith("1 left: in sq60: in session(s) held by another receiver ('c'") for n in report.notes)
    assert emulator.broker.counts("sq60") == {"active": 1, "deferred": 0, "scheduled": 0, "dead_letter": 0}
    assert core.purge("sq60", connection=conn).count("purged") == 1  # c, now that it is free


def test_a_resubmit_far_from_its_namespace_takes_each_next_batch_as_it_is_there_now(emulator: Emulator) -> None:
    """After its first batch a resubmit takes what is there now, with a drain: one round trip, however
    long. It waited half a second for it: from a namespace further away (every frame 0.6 s late here),
    its second receive got nothing and the run ended with most messages left behind, the batch it had
    been sent locked to an idle link."""
    conn = core.connect(emulator.connection_string)
    core.send("q", ["warm"], connection=conn)
    assert core.resubmit("q", target="once", connection=conn).ok  # its links open before the latency starts
    core.send("q", [f"m{i}" for i in range(25)], connection=conn)
    emulator.latency_ms = 600
    try:
        report = core.resubmit("q", target="once", max_in_flight=1, batch_size=10, connection=conn)
    finally:
        emulator.latency_ms = 0
    assert report.ok and report.count("resubmitted") == 25, report
    assert report.stats["batches"] == 3
    # the broker, read apart from the report: every message moved, none left or locked in q
    assert emulator.broker.counts("q")["active"] == 0 and emulator.broker.counts("once")["active"] == 26
    assert [m.sequence_number for m in emulator.broker.resolve_source("q").store.iter_from(1) if m.locked] == []


def test_a_batch_past_the_selection_does_not_send_back_what_other_workers_hold_of_it(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """With a ``where``, a batch wholly past the last selected message ends the run's receiving, but
    the batches other workers received before it are moved still: they were sent back whole, and the
    selected messages in them reported "left" (seen in playbooks: 50 of 300 in one run of three).
    Here two workers: the first moves batch 1 (its copies slow: the target is far) and holds batch 2,
    selected too; the second takes batch 3, past the selection, whose move copies nothing and ends
    at once, well before batch 1's."""
    conn = core.connect(emulator.connection_string)
    kinds = ["chosen"] * 20 + ["after"] * 30
    core.send("q", [{"body": f"{k}-{i}", "application_properties": {"kind": k}} for i, k in enumerate(kinds)],
              connection=conn)  # fmt: skip
    _dead_letter_all(client, "q", len(kinds))
    emulator.slow_down("once", latency_ms=500)
    report = core.resubmit("q/$deadletterqueue", target="once", where="props.kind == 'chosen'",
                           batch_size=10, max_in_flight=2, connection=conn)  # fmt: skip
    assert report.count("resubmitted") == 20 and not report.count("left"), report
    # the broker, read apart from the report: each chosen message at the target, the rest still dead letters
    with client.get_queue_receiver("once") as r:
        moved = sorted(b"".join(m.body).decode() for m in r.peek_messages(max_message_count=100))
    assert moved == sorted(f"chosen-{i}" for i in range(20))
    assert emulator.broker.counts("q")["dead_letter"] == 30 and emulator.broker.counts("q")["active"] == 0


def test_messages_a_resubmit_did_not_receive_are_left_with_what_it_knows_not_a_guess_at_why(
    emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another receiver holds both messages of q's DLQ while the resubmit's first receive waits its
    2 s and gets nothing; their locks end (the emulator's lose_locks) just before the resubmit reads
    what is left. Both are left, not locked, enqueued before the run: the reason says what the run
    knows (its receive got nothing within 2 s), not why (it read 'given back by a receiver after the
    resubmit passed it', which the kit cannot see)."""
    conn = core.connect(emulator.connection_string)
    core.send("q", ["a", "b"], connection=conn)
    _dead_letter_all(client, "q", 2)
    real = run_module.anything_there
    ended: list[int] = []

    async def locks_end_first(*args: Any, **kwargs: Any) -> bool:
        ended.append(emulator.lose_locks("q/$deadletterqueue"))
        return await real(*args, **kwargs)

    monkeypatch.setattr(run_module, "anything_there", locks_end_first)
    # Sent a moment before the run: without this the 2 s margin for "arrived while it ran" takes them.
    monkeypatch.setattr(leftovers, "ARRIVAL_MARGIN", dt.timedelta(0))
    with client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=3) as other:
        assert len(other.receive_messages(max_message_count=2, max_wait_time=3)) == 2
        report = core.resubmit("q/$deadletterqueue", target="q", connection=conn)
    assert ended == [2]
    reason = "still there: the resubmit ended when its receive got nothing within 2 s"
    assert report.counts == {"left": 2} and not report.ok, report
    assert [str(o.error) for o in report.failures] == [reason, reason]
    assert f"2 left: {reason} (run it again to resubmit them)" in report.notes
    # the broker, read apart from the report: both still in the DLQ, nothing sent to q
    assert emulator.broker.counts("q") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 2}


def test_messages_a_purge_left_unlocked_are_left_with_what_the_peek_shows(
    emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a purge, which knows only what the last peek shows: another receiver holds q's 2
    messages through the purge (batch delete passes locked ones over), and their locks end just
    before the purge reads what is left. Both are left as 'not locked, and enqueued before the purge
    began' (it read 'given back by a receiver after the purge passed it')."""
    conn = core.connect(emulator.connection_string)
    core.send("q", ["a", "b"], connection=conn)
    real = purge_module.what_purge_left
    ended: list[int] = []

    async def locks_end_first(*args: Any, **kwargs: Any) -> None:
        ended.append(emulator.lose_locks("q"))
        await real(*args, **kwargs)

    monkeypatch.setattr(purge_module, "what_purge_left", locks_end_first)
    monkeypatch.setattr(leftovers, "ARRIVAL_MARGIN", dt.timedelta(0))  # as above
    with client.get_queue_receiver("q", max_wait_time=3) as other:
        assert len(other.receive_messages(max_message_count=2, max_wait_time=3)) == 2
        report = core.purge("q", connection=conn)
    assert ended == [2]
    reason = "still there: not locked, and enqueued before the purge began"
    assert report.counts == {"left": 2} and not report.ok, report
    assert [str(o.error) for o in report.failures] == [reason, reason]
    assert emulator.broker.counts("q") == {"active": 2, "deferred": 0, "scheduled": 0, "dead_letter": 0}


def test_counts_through_the_admin_api(emulator: Emulator, client: ServiceBusClient) -> None:
    cs = emulator.connection_string
    core.send("q", ["a", "b"], connection=cs)
    _dead_letter_all(client, "q", 1)
    c = core.counts("q/$deadletterqueue", connection=cs)  # counts are per entity
    assert (c.entity, c.active, c.dead_letter, c.total) == ("q", 1, 1, 2)
    with pytest.raises(core.EntityNotFoundError):
        core.counts("missing", connection=cs)


def test_resubmit_after_a_broker_restart_reconnects_by_itself(tmp_path: Path) -> None:
    # Found by benchmarks/chaos_soak.py: the first resubmit after a restart raised the SDK's raw
    # ServiceBusConnectionError (its pooled link was dead) instead of reconnecting like every other call.
    port = free_port()
    first = Emulator(TEST_TOPOLOGY, port=port, data_dir=tmp_path).start()
    conn = core.connect(first.connection_string, warm=False)
    try:
        core.send("q", ["a", "b"], connection=conn)
        with core.receive("q", max_messages=2, connection=conn) as batch:
            batch.dead_letter(reason="bad")
        assert len(core.peek("q/$deadletterqueue", connection=conn)) == 2  # a warm link, soon dead
        first.stop()
        with Emulator(TEST_TOPOLOGY, port=port, data_dir=tmp_path):
            report = core.resubmit("q/$deadletterqueue", target="q", connection=conn)
            assert report.count("resubmitted") == 2, report
            assert conn.reconnects >= 1 and any("reconnected" in n for n in report.notes)
            assert sorted(r["body_text"] for r in core.peek("q", connection=conn)) == ["a", "b"]
    finally:
        conn.close()
        first.stop()


def test_a_session_holding_only_deferred_messages_is_reported_left_and_purged_by_name(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """Service Bus lists sessions with available messages or state: one holding nothing but
    deferred messages is not listed, so a purge cannot find it. The report says messages are left
    (it must not look complete), and naming the session purges it."""
    conn = core.connect(emulator.connection_string)
    with client.get_queue_sender("sq60") as sender:
        sender.send_messages([ServiceBusMessage(b, session_id=s) for s, b in [("a", "a1"), ("d", "d1"), ("d", "d2")]])
    with client.get_queue_receiver("sq60", session_id="d", max_wait_time=3) as r:
        for m in r.receive_messages(max_message_count=2, max_wait_time=3):
            r.defer_message(m)
    assert [s.session_id for s in core.list_sessions("sq60", connection=conn)] == ["a"]

    report = core.purge("sq60", connection=conn)
    # Two are left: the report is not ok (it was), and its line says where they may be.
    assert report.count("purged") == 1 and report.count("left") == 2 and not report.ok
    assert any(n.startswith("2 left: in sq60") and "session_ids" in n for n in report.notes), report.notes
    assert "session_ids" in str(report)  # the one-line summary a notebook shows

    named = core.purge("sq60", session_ids=["d"], connection=conn)
    assert named.count("purged") == 2 and named.ok and not named.notes  # d peeked again: nothing left
    assert emulator.broker.counts("sq60") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}
    with pytest.raises(core.InvalidInputError, match="does not require sessions"):
        core.purge("q", session_ids=["d"], connection=conn)
    with pytest.raises(core.InvalidInputError, match="session_ids"):
        core.purge("sq60", session_ids=[""], connection=conn)


def test_a_purge_of_named_sessions_reads_what_they_still_hold(emulator: Emulator, client: ServiceBusClient) -> None:
    """Named sessions are peeked again after the purge: kinds not asked for are counted in a note;
    a session another receiver holds cannot be read, so its messages are not counted: an error of
    the report says so, and no outcome (no 'failed' message) is made up for it."""
    conn = core.connect(emulator.connection_string)
    with client.get_queue_sender("sq60") as sender:
        sender.send_messages([ServiceBusMessage(f"e{i}", session_id="e") for i in range(3)])
        sender.send_messages([ServiceBusMessage("f0", session_id="f")])
    with client.get_queue_receiver("sq60", session_id="e", max_wait_time=3) as r:
        (first,) = r.receive_messages(max_message_count=1, max_wait_time=3)
        r.defer_message(first)
    report = core.purge("sq60", session_ids=["e"], deferred=False, connection=conn)
    assert report.count("purged") == 2 and report.ok and report.total == 2, report
    assert report.notes == ["session 'e': 1 deferred message(s) not asked for: left as they are"]
    assert [m["state"] for m in core.scan_records("sq60", session_id="e", connection=conn)] == ["deferred"]
    with client.get_queue_receiver("sq60", session_id="f", max_wait_time=1):  # another receiver holds f
        held = core.purge("sq60", session_ids=["f"], connection=conn)
    assert held.total == 0 and not held.ok, held
    assert held.errors == [
        "session 'f' is held by another receiver: not purged, and what it holds not counted"
        " (a held session cannot be read; purge again once it lets the session go)"
    ]
    assert str(held).startswith("purge sq60: nothing done of 0 in")
    assert [str(m) for m in _peek_session(client, "f")] == ["f0"]  # the broker still holds it


def _peek_session(client: ServiceBusClient, session_id: str) -> list[Any]:
    with client.get_queue_receiver("sq60", session_id=session_id, max_wait_time=5) as r:
        return list(r.peek_messages(max_message_count=10))


def _peek(client: ServiceBusClient, queue: str, session_id: str) -> list[Any]:
    with client.get_queue_receiver(queue, session_id=session_id, max_wait_time=5) as r:
        return list(r.peek_messages(max_message_count=10))


def test_a_named_session_that_loses_its_lock_mid_purge_counts_each_message_once(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """A session whose purge fails for a reason other than another receiver holding it (here its
    lock ends early: the emulator's lose_session_locks, after the first batch of 500 is completed)
    is no message: what it still holds is left, with the failure as the reason, and no 'failed'
    outcome is added beside them (every outcome is a message: 501 sent, 500 purged, 1 left)."""
    conn = core.connect(emulator.connection_string)
    with client.get_queue_sender("sq60") as sender:
        sender.send_messages([ServiceBusMessage(f"s{i}", session_id="s") for i in range(501)])
    lost: list[int] = []

    def lose_the_session_lock_after_the_first_batch(report: core.Report) -> None:
        if report.count("purged") >= 500 and not lost:
            lost.append(emulator.lose_session_locks("sq60"))

    report = core.purge(
        "sq60", session_ids=["s"], progress=lose_the_session_lock_after_the_first_batch, connection=conn
    )
    assert lost == [1]  # the purge held the session when its lock was lost
    assert report.counts == {"purged": 500, "left": 1} and report.total == 501 and not report.ok, report
    (left,) = report.failures
    assert left.outcome == "left" and "session 's' not purged (or not all of it)" in str(left.error)
    assert "lock" in str(left.error).lower()
    assert any(n.startswith("session 's': 1 left: session 's' not purged") for n in report.notes), report.notes
    assert [str(m) for m in _peek(client, "sq60", "s")] == ["s500"]  # the broker still holds it


def test_a_listed_session_whose_lock_is_lost_mid_purge_counts_each_message_once(
    emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for listed sessions (counted at the end by the administration API): session 'd' of
    sq (LockDuration 2 s) holds 1 active and 3 deferred messages; the server deletes the active one,
    the purge fetches the deferred ones 2 at a time, and after the first 2 the session lock is lost:
    the next fetch fails. 4 sent, 3 purged, 1 left, no 'failed' outcome for the session."""
    monkeypatch.setattr(purge_module, "BY_SEQUENCE", 2)  # two fetches by number with 3 deferred messages
    conn = core.connect(emulator.connection_string)
    one_active_three_deferred_in_session_d(client)
    lost: list[int] = []
    report = core.purge("sq", progress=lose_the_session_lock_after_two_deferred(emulator, lost), connection=conn)
    assert lost == [1]
    assert report.counts == {"purged": 3, "left": 1} and report.total == 4 and not report.ok, report
    (left,) = report.failures
    assert left.outcome == "left" and "session(s) whose purge failed (session 'd' not purged" in str(left.error)
    assert [str(m) for m in _peek(client, "sq", "d")] == ["d2"]  # the third deferred one, still there
    assert emulator.broker.counts("sq") == {"active": 0, "deferred": 1, "scheduled": 0, "dead_letter": 0}


def test_a_failed_session_with_nothing_counted_after_it_is_an_error_not_a_complete_purge(
    emulator: Emulator, client: ServiceBusClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same failure with a key of sq that may Listen and Send but not Manage (as applications are
    given): the purge works, but what the failed session left cannot be counted (the administration
    API needs Manage), so no 'left' outcome can be made. The report must not read as complete: the
    session's failure is an error of the report (ok is False, raise_for_failures raises), and so is
    that what is left was not counted. 4 sent, 3 purged, 1 still on the broker."""
    monkeypatch.setattr(purge_module, "BY_SEQUENCE", 2)
    emulator.add_policy("app", ["Listen", "Send"], "sq")
    conn = core.connect(emulator.policy_connection_string("app", "sq"))
    one_active_three_deferred_in_session_d(client)
    lost: list[int] = []
    report = core.purge("sq", progress=lose_the_session_lock_after_two_deferred(emulator, lost), connection=conn)
    assert lost == [1]
    assert report.counts == {"purged": 3} and not report.ok, report
    error, uncounted = report.errors
    assert error.startswith("session 'd' not purged (or not all of it): "), error
    assert error.endswith("; what it still holds was not counted") and "lock" in error.lower(), error
    assert uncounted.startswith("what is left in sq was not counted, so the purge is not confirmed complete: ")
    assert "'Manage' right" in uncounted, uncounted
    summary = report.summary()
    assert summary.startswith("purge sq: 3 purged of 3 in ") and f"[ERRORS: {error}; {uncounted}]" in summary, summary
    with pytest.raises(core.SbError, match="purge sq: session 'd' not purged"):
        report.raise_for_failures()
    # the broker, read apart from the report: the third deferred message is still there
    assert emulator.broker.counts("sq") == {"active": 0, "deferred": 1, "scheduled": 0, "dead_letter": 0}
    assert [str(m) for m in _peek(client, "sq", "d")] == ["d2"]
