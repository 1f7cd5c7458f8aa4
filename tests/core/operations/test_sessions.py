"""Sessions through the core: list them with state, message count and lock status; read and write
a session's state. The real SDK against the embedded emulator."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbnotebook import core
from sbnotebook.core import InvalidInputError, SessionLockedError
from sbnotebook.emulator import Emulator
from tests.processes import server_sockets


def _send(client: ServiceBusClient, entity: str, *pairs: tuple[str, str]) -> None:
    sender = client.get_topic_sender(entity) if entity == "st" else client.get_queue_sender(entity)
    with sender:
        sender.send_messages([ServiceBusMessage(body, session_id=sid) for sid, body in pairs])


def test_list_sessions_with_state_counts_and_lock_status(emulator: Emulator, client: ServiceBusClient) -> None:
    conn = core.connect(emulator.connection_string)
    _send(client, "sq60", ("a", "1"), ("a", "2"), ("b", "3"), ("c", "4"))
    core.set_session_state("sq60", "b", '{"step": 2}', connection=conn)
    with client.get_queue_receiver("sq60", session_id="c", max_wait_time=1):  # another receiver holds c
        found = {s.session_id: s for s in core.list_sessions("sq60", connection=conn)}
    assert set(found) == {"a", "b", "c"}
    assert (found["a"].messages, found["a"].state, found["a"].locked) == (2, None, False)
    assert found["a"].last_enqueued is not None
    assert (found["b"].messages, found["b"].state_text) == (1, '{"step": 2}')
    assert found["c"].locked and found["c"].messages is None and found["c"].state is None
    # Looking at a session gives it back: it can be received at once, with no delivery counted.
    with client.get_queue_receiver("sq60", session_id="a", max_wait_time=1) as r:
        got = r.receive_messages(max_message_count=2, max_wait_time=30)
        assert [m.delivery_count for m in got] == [0, 0]
    ids = core.list_sessions("sq60", details=False, connection=conn)
    assert sorted(s.session_id for s in ids) == ["a", "b", "c"]
    capped = core.list_sessions("sq60", max_sessions=2, max_counted=1, connection=conn)
    assert len(capped) == 2 and all(s.messages == 1 for s in capped) and capped[0].more is (capped[0].session_id == "a")


def test_sessions_of_a_subscription_and_state_updated_after(emulator: Emulator, client: ServiceBusClient) -> None:
    conn = core.connect(emulator.connection_string)
    _send(client, "st", ("x", "1"))
    before = dt.datetime.now(dt.UTC)
    assert core.set_session_state("st/subscriptions/s", "y", b"\xff\x01", connection=conn) is None
    listed = core.list_sessions("st/subscriptions/s", connection=conn)
    assert sorted(s.session_id for s in listed) == ["x", "y"]
    y = next(s for s in listed if s.session_id == "y")
    assert y.state == b"\xff\x01" and y.state_text == "<2 binary bytes>" and y.messages == 0
    updated = core.list_sessions("st/subscriptions/s", updated_after=before - dt.timedelta(seconds=1), connection=conn)
    assert [s.session_id for s in updated] == ["y"]


def test_session_state_get_set_clear_and_a_held_session(emulator: Emulator, client: ServiceBusClient) -> None:
    conn = core.connect(emulator.connection_string)
    assert core.get_session_state("sq60", "s-1", connection=conn) is None
    assert core.set_session_state("sq60", "s-1", "one", connection=conn) is None
    assert core.set_session_state("sq60", "s-1", "two", connection=conn) == b"one"
    assert core.get_session_state("sq60", "s-1", connection=conn) == b"two"
    with client.get_queue_receiver("sq60", session_id="s-1", max_wait_time=1) as r:
        assert r.session.get_state() == b"two"  # what the SDK sees
        with pytest.raises(SessionLockedError, match="held by another receiver"):
            core.set_session_state("sq60", "s-1", "three", connection=conn)
    assert core.set_session_state("sq60", "s-1", None, connection=conn) == b"two"
    assert core.get_session_state("sq60", "s-1", connection=conn) is None
    assert [s.session_id for s in core.list_sessions("sq60", connection=conn)] == []
    with pytest.raises(InvalidInputError, match="dead-letter"):
        core.list_sessions("sq60/$deadletterqueue", connection=conn)


@pytest.mark.servicebus_clock("manual")
@pytest.mark.parametrize("pause", [1.3, 2.6], ids=["renewed-in-time", "lost-between-pages"])
def test_a_session_scan_slower_than_the_lock_reads_every_page(
    emulator: Emulator, client: ServiceBusClient, pause: float, caplog: pytest.LogCaptureFixture
) -> None:
    """Peeking a session needs its lock ("sq" holds it 2 s). Found under CPU contention: a Spark
    session read whose pages took longer than the lock failed with "Lock lost". Now the scan renews
    the lock once half of it is used, and if it is lost all the same (a pause longer than the lock),
    accepts the session again and peeks that page again: a peek changes nothing.

    The pause is the broker's time (the manual clock), so a renewal a loaded machine made late cannot
    lose the lock; it is waited for on the wall clock too, which is what the scan renews by."""
    conn = core.connect(emulator.connection_string)
    _send(client, "sq", *[("a", f"m{i}") for i in range(6)])
    # The SDK checks a session's lock against this machine's clock before every call (and the kit
    # renews by it): set the broker's clock half a second ahead of it, so that the time spent since
    # the emulator started (its connections, the sends: over 0.7 s in a loaded full test run) does not
    # count against the lock. Ahead by less than 0.6 s, the scan still renews at its second page.
    emulator.advance(max(0.0, time.time() + 0.5 - emulator.now().timestamp()))
    seen: list[str] = []
    with caplog.at_level("INFO", logger="sbnotebook.core.operations.scan"):
        for page in core.scan("sq", session_id="a", page_size=2, connection=conn):
            seen += [r["body_text"] for r in page]
            time.sleep(pause)  # the scan's own clock: over half the lock used, it renews first
            emulator.advance(pause)  # the broker's: the lock lapses only past 2 s, however late the renewal
    assert seen == [f"m{i}" for i in range(6)]
    accepted_again = "accepted it again" in caplog.text
    assert accepted_again is (pause > 2), caplog.text
    assert (emulator.requests["com.microsoft:renew-session-lock"] >= 2) is (pause < 2)  # renewed, not waited for
    with client.get_queue_receiver("sq", session_id="a", max_wait_time=30) as r:  # given back, nothing counted
        assert [m.delivery_count for m in r.receive_messages(max_message_count=6, max_wait_time=30)] == [0] * 6


def test_a_session_receiver_is_closed_at_once_and_its_session_is_free_when_the_call_returns(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """The kit closes the receivers it opens per call (session receivers, receive-and-delete) without
    waiting out the SDK's keep-alive sleep (``sdk/opening.close_now``). The session must still be given back
    before the call returns, and no keep-alive task may be left running on the live connection."""
    import asyncio

    async def keep_alives() -> int:  # one per open SDK sender or receiver
        return sum("keep_alive" in repr(t.get_coro()) for t in asyncio.all_tasks())

    conn = core.connect(emulator.connection_string)
    _send(client, "sq60", ("s", "1"), ("s", "2"), ("s", "3"))
    conn.settle()  # connect()'s warm-up opens links in the background
    pooled = conn.run(keep_alives())  # the live connection's own links stay open
    for expected in ("1", "2", "3"):
        with core.receive("sq60", max_messages=1, session_id="s", connection=conn) as batch:
            assert [r["body_text"] for r in batch.records] == [expected]
            batch.complete()
        assert conn.run(keep_alives()) == pooled  # nothing of the closed receiver still runs
        # Free the moment the batch is closed: another receiver accepts it without waiting.
        with client.get_queue_receiver("sq60", session_id="s", max_wait_time=1) as other:
            assert other.session.session_id == "s"


def test_listing_sessions_pages_past_one_page_on_a_handler_that_stays_open(emulator: Emulator) -> None:
    """get-message-sessions returns 100 ids a page. The kit asks on a management handler that the
    live connection keeps (the SDK's own listing opens and closes one per call: about 1 s)."""
    assert emulator.port is not None
    conn = core.connect(emulator.connection_string)
    core.send("sq60", [{"body": "m", "session_id": f"s{i:03}"} for i in range(250)], connection=conn)
    conn.settle()  # the warm-up and the spare connections: open before counting
    before = server_sockets(emulator.port)
    first = core.list_sessions("sq60", details=False, max_sessions=1000, connection=conn)
    conn.settle()
    kept = server_sockets(emulator.port)
    # The listing's handler took a spare connection (counted before) and one more spare was opened.
    assert len(kept - before) == 1
    again = core.list_sessions("sq60", details=False, max_sessions=1000, connection=conn)
    expected = [f"s{i:03}" for i in range(250)]
    assert sorted(s.session_id for s in first) == expected == sorted(s.session_id for s in again)
    assert server_sockets(emulator.port) == kept  # the second listing used the same connection
    assert len(core.list_sessions("sq60", details=False, max_sessions=120, connection=conn)) == 120


def test_listing_sessions_of_an_entity_without_sessions_says_why_in_plain_text(emulator: Emulator) -> None:
    """The SDK words a management reply's description as a bytes repr (b"..."); the kit's error
    shows the text itself."""
    conn = core.connect(emulator.connection_string)
    with pytest.raises(core.SbError) as caught:
        core.list_sessions("q", connection=conn)
    text = str(caught.value)
    assert "'q' is not session-enabled" in text and 'b"' not in text and "b'" not in text, text


def test_deferred_messages_fetched_in_a_session_report_a_lost_session_lock(
    emulator: Emulator, client: ServiceBusClient
) -> None:
    """A deferred message fetched with session_id is locked by that session: when the session lock
    is lost, completing it reports lock_lost (the SDK's SessionLockLostError) and it stays deferred."""
    _send(client, "sq60", ("k", "later"))
    with client.get_queue_receiver("sq60", session_id="k", max_wait_time=3) as r:
        (msg,) = r.receive_messages(max_wait_time=3)
        r.defer_message(msg)
    conn = core.connect(emulator.connection_string)
    with core.receive_deferred("sq60", [msg.sequence_number], session_id="k", connection=conn) as batch:
        assert len(batch) == 1
        assert emulator.lose_session_locks("sq60") == 1
        report = batch.complete()
    (outcome,) = list(report)
    assert outcome.outcome == "lock_lost" and "session lock" in (outcome.error or "").lower()
    assert emulator.broker.counts("sq60") == {"active": 0, "deferred": 1, "scheduled": 0, "dead_letter": 0}
