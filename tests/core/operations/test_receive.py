"""Locked batches: receive, renewal, per-message settlement outcomes."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient
from proton import Message

from sbnotebook import core
from sbnotebook.core import InvalidInputError
from sbnotebook.emulator import Emulator
from sbnotebook.emulator.amqp.codec import decode_message
from tests.helpers import send
from tests.waiting import HANG, renewed_past_the_lock, wait_until


def credit_at_the_broker(emulator: Emulator, entity: str) -> int:
    """The credit receivers have given the broker on their links from ``entity``: what it may still
    deliver to them unasked (read on the broker, not by waiting for a delivery)."""
    store = emulator.broker.resolve_source(entity).store
    links = [o.link for o in list(emulator._handler._out.values()) if o.source is not None and o.source.store is store]
    return sum(link.credit for link in links)


def test_receive_settle_each_way_and_see_outcomes(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("q", [f"m{i}" for i in range(5)], connection=cs)
    with core.receive("q", max_messages=5, connection=cs) as batch:
        assert len(batch) == 5 and "5 unsettled" in repr(batch)
        assert all(s is not None and 25 < s <= 30 for s in batch.seconds_left())  # LockDuration PT30S
        done = batch.complete([0, 1])
        assert [o.outcome for o in done] == ["completed", "completed"]
        assert batch.abandon(2, properties={"attempt": 2}).outcomes[0].outcome == "abandoned"
        assert batch.dead_letter(3, reason="Invalid", description="no id").outcomes[0].outcome == "dead_lettered"
        (deferred,) = batch.defer(4)
        assert batch.complete(0).outcomes[0].outcome == "already_settled"
        assert batch.unsettled == []
        assert list(batch.to_pandas()["settlement"]) == [
            "completed",
            "completed",
            "abandoned",
            "dead_lettered",
            "deferred",
        ]
    counts = emulator.broker.counts("q")
    assert counts == {"active": 1, "deferred": 1, "scheduled": 0, "dead_letter": 1}
    (again,) = core.peek("q", connection=cs).records[:1]
    assert again["application_properties"]["attempt"] == "2" and again["delivery_count"] == 1
    with core.receive_deferred("q", [deferred.sequence_number], connection=cs) as later:
        assert later.records[0]["body_text"] == "m4"
        assert later.complete().outcomes[0].outcome == "completed"
    assert emulator.broker.counts("q")["deferred"] == 0


@pytest.mark.servicebus_clock("manual")
def test_locks_are_renewed_while_the_batch_is_held(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("short", ["slow work"], connection=cs)  # LockDuration PT1S
    with core.receive("short", max_messages=1, connection=cs) as batch:
        renewed_past_the_lock(emulator, lock=1.0)  # the broker's time 2.4 s on: far past the 1 s lock
        (outcome,) = batch.complete()
        assert outcome.outcome == "completed"
    assert emulator.broker.counts("short")["active"] == 0


@pytest.mark.servicebus_clock("manual")
def test_a_lost_lock_is_an_outcome_not_a_crash(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("short", ["a", "b"], connection=cs)
    with core.receive("short", max_messages=2, auto_renew=False, connection=cs) as batch:
        emulator.advance(1.5)  # past the 1 s lock, on the broker's clock
        outcomes = batch.complete()
        assert {o.outcome for o in outcomes} == {"lock_lost"} and not outcomes.ok
        assert "lock_lost" in set(batch.to_pandas()["settlement"])


def test_lost_locks_from_the_service_side(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("q", ["x", "y"], connection=cs)
    with core.receive("q", max_messages=2, connection=cs) as batch:
        emulator.lose_locks("q")
        outcomes = batch.complete()
        assert [o.outcome for o in outcomes] == ["lock_lost", "lock_lost"]
    assert emulator.broker.counts("q")["active"] == 2


def test_receive_and_delete_is_already_settled(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("q", ["gone"], connection=cs)
    with core.receive("q", max_messages=5, mode="receive_and_delete", wait_seconds=HANG, connection=cs) as batch:
        assert [r["body_text"] for r in batch.records] == ["gone"]  # the wait ends at the first message
        with pytest.raises(InvalidInputError, match="already removed"):
            batch.complete()
    assert emulator.broker.counts("q")["active"] == 0


def test_empty_receive_and_bad_arguments(emulator: Emulator) -> None:
    cs = emulator.connection_string
    with core.receive("q", max_messages=3, wait_seconds=0.5, connection=cs) as batch:
        assert len(batch) == 0 and batch.complete().total == 0
    with pytest.raises(InvalidInputError):
        core.receive("q", max_messages=0, connection=cs)
    with pytest.raises(InvalidInputError):
        core.receive("q", mode="peek", connection=cs)  # type: ignore[arg-type]
    with pytest.raises(core.EntityNotFoundError):
        core.receive("missing", connection=cs)


@pytest.mark.servicebus_clock("manual")  # the 30 s lock cannot run out and give it back instead
def test_closing_gives_locks_back(emulator: Emulator) -> None:
    cs = emulator.connection_string
    core.send("q", ["held"], connection=cs)
    batch = core.receive("q", max_messages=1, connection=cs)
    batch.close()
    with pytest.raises(InvalidInputError, match="closed"):
        batch.complete()
    wait_until(lambda: emulator.broker.counts("q")["active"] == 1)


def test_a_receive_leaves_no_credit_that_would_lock_the_next_messages_away_from_others(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """The kit keeps its receiver link open between calls. Credit a receive asked for and did not
    use would have the broker deliver the next messages to that idle link, locked, until the SDK's
    keep-alive gives them back (about 5 s): another consumer, such as a Spark stream's next
    trigger, saw nothing meanwhile (a CI run of notebooks/08 stopped with 10 messages left)."""
    cs = emulator.connection_string
    core.send("q", ["first"], connection=cs)
    with core.receive("q", max_messages=20, wait_seconds=30, connection=cs) as batch:  # 1 of 20: 19 unused
        batch.complete()
    with core.receive("q", max_messages=20, wait_seconds=0.3, connection=cs) as batch:  # 0 of 20
        assert len(batch) == 0
    # Read at the broker, not timed: no credit on the kit's links, so nothing can be delivered to
    # them now or later (what an idle link held would reach another consumer only after the SDK's
    # 5 s keep-alive gave it back).
    wait_until(lambda: credit_at_the_broker(emulator, "q") == 0)
    send(client, "q", *[f"m{i}" for i in range(10)])
    store = emulator.broker.resolve_source("q").store
    assert [m.sequence_number for m in store.iter_from(1) if m.locked] == []
    got: list[str] = []
    deadline = time.monotonic() + HANG
    with client.get_queue_receiver("q") as other:
        while len(got) < 10 and time.monotonic() < deadline:
            for m in other.receive_messages(max_message_count=10, max_wait_time=5):
                got.append(str(m))
                other.complete_message(m)
    assert sorted(got) == sorted(f"m{i}" for i in range(10))


def test_a_refused_one_request_settlement_falls_back_loudly(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """No silent fallback: when settling many locks in one request fails, each message is settled on
    its own, the log says why once, and the report notes the slower path."""
    import logging

    cs = emulator.connection_string
    core.send("q", [f"m{i}" for i in range(4)], connection=cs)
    with core.receive("q", max_messages=4, connection=cs) as batch:
        assert len(batch) == 4
        emulator.lose_locks("q")  # the broker forgets the locks; the client still thinks they are held
        with caplog.at_level(logging.INFO, logger="sbnotebook"):
            report = batch.complete()
    assert report.count("lock_lost") == 4 and not report.ok
    assert report.notes and "one by one" in report.notes[0]
    assert "one by one" in report.summary()
    assert sum("one by one" in r.getMessage() for r in caplog.records) == 1


def test_a_receive_without_a_wait_takes_what_is_there_now_in_one_round_trip_whatever_the_latency(
    emulator: Emulator,
) -> None:
    """``wait_seconds=0``: what is there now, asked for with a drain (the broker sends what it has and
    answers), so one round trip however long that is. It was a wait of half a second: from a namespace
    further away (every frame 1 s late here) it returned nothing and left the messages it had been
    sent locked to an idle link."""
    cs = emulator.connection_string
    core.send("q", ["a", "b", "c"], connection=cs)
    core.receive("q", max_messages=1, connection=cs).close()  # the link is open before the latency starts
    wait_until(lambda: emulator.broker.counts("q")["active"] == 3)  # given back
    emulator.latency_ms = 1000
    try:
        batch = core.receive("q", max_messages=10, wait_seconds=0, connection=cs)
    finally:
        emulator.latency_ms = 0
    with batch:
        assert sorted(r["body_text"] for r in batch.records) == ["a", "b", "c"]
        assert batch.complete().count("completed") == 3
    assert emulator.broker.counts("q")["active"] == 0  # the broker's own count
    assert credit_at_the_broker(emulator, "q") == 0  # the drain used up the rest: nothing more comes to the link
    core.send("q", ["d"], connection=cs)
    store = emulator.broker.resolve_source("q").store
    assert [m.sequence_number for m in store.iter_from(1) if m.locked] == []  # "d" waits for whoever asks


@pytest.mark.parametrize("count", [5, 1], ids=["credit-left", "all-credit-sent"])
def test_receive_and_delete_returns_what_was_on_its_way_when_the_wait_ran_out(emulator: Emulator, count: int) -> None:
    """Receive-and-delete removes a message when the broker sends it. A wait that ends while a
    message is on its way (far from the namespace, the message was sent but has not arrived)
    must still hand it over: closing the link then would lose it with nobody having seen it.
    With count 1 the broker has used all the credit, so nothing more can come: the kit must not
    wait for a drain answer beyond that one message."""
    cs = emulator.connection_string
    core.send("q", ["on its way"], connection=cs)
    core.peek("q", connection=cs)  # the live connection is open before the latency starts
    emulator.latency_ms = 1000  # every frame from the broker arrives 1 s after it was sent
    with core.receive("q", max_messages=count, mode="receive_and_delete", wait_seconds=0.2, connection=cs) as batch:
        got = [r["body_text"] for r in batch.records]
    emulator.latency_ms = 0
    assert emulator.broker.counts("q")["active"] == 0  # the broker sent it: it is gone from there
    assert got == ["on its way"]


def test_receive_and_delete_keeps_its_drained_link_which_takes_nothing_while_idle(emulator: Emulator) -> None:
    """A drained receive-and-delete link has no credit and nothing on its way, so the live
    connection keeps it for the next call (opening one costs about 0.5 s). Idle, it must take
    nothing: a message it took then would be deleted with nobody to hand it to."""
    with core.connect(emulator.connection_string) as conn:
        core.send("q", ["a"], connection=conn)
        with core.receive("q", max_messages=5, mode="receive_and_delete", wait_seconds=30, connection=conn) as batch:
            assert [r["body_text"] for r in batch.records] == ["a"]  # 1 of 5: the wait ended with credit left
        conn.settle()  # connect()'s warm-up opens links in the background
        opened = conn.links_opened
        wait_until(lambda: credit_at_the_broker(emulator, "q") == 0)  # nothing can be delivered to it
        core.send("q", ["b", "c"], connection=conn)
        assert emulator.broker.counts("q")["active"] == 2  # still there: the idle link took nothing
        with core.receive("q", max_messages=5, mode="receive_and_delete", wait_seconds=30, connection=conn) as batch:
            assert sorted(r["body_text"] for r in batch.records) == ["b", "c"]
        assert conn.links_opened == opened  # the same link
    assert emulator.broker.counts("q")["active"] == 0


def test_a_receive_and_delete_whose_connection_drops_while_draining_returns_what_it_had(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """The messages a receive-and-delete has in hand are gone from Service Bus: when the
    connection fails after they arrived (here while the link drains for more after them), the
    receive returns them and says what happened, instead of raising and losing them. The queue is
    empty when the receive begins (its first drain finds nothing); the message is sent while it
    waits, and the connection drops during the drain that follows it."""
    cs = emulator.connection_string
    core.peek("q", connection=cs)
    emulator.latency_ms = 1000  # the drain's answer takes a second: the connection drops before it
    store = emulator.broker.resolve_source("q").store
    message = decode_message(bytes(Message(body=b"in hand", inferred=True).encode()))  # a data body

    def links() -> list[Any]:
        return [o.link for o in list(emulator._handler._out.values()) if o.source and o.source.store is store]

    def send_while_waiting_then_drop_while_draining() -> None:
        deadline = time.monotonic() + HANG
        sent = False
        while time.monotonic() < deadline:
            if not sent and any(link.credit > 0 and not link.drain_mode for link in links()):
                emulator.call_soon(lambda: emulator.broker.send("q", [message]))
                sent = True  # while the receive waits (its first drain found nothing)
            draining = [link for link in links() if link.drain_mode]
            if sent and draining and emulator.broker.counts("q")["active"] == 0:  # taken: on its way, or in hand
                emulator.call_soon(functools.partial(emulator._loop.abort, draining[0].connection))
                return
            time.sleep(0.01)

    helper = threading.Thread(target=send_while_waiting_then_drop_while_draining)
    helper.start()
    with core.receive("q", max_messages=5, mode="receive_and_delete", wait_seconds=5, connection=cs) as batch:
        got = [r["body_text"] for r in batch.records]
    helper.join()
    emulator.latency_ms = 0
    assert got == ["in hand"]
    assert "failed after 1 message(s) had been received" in caplog.text
