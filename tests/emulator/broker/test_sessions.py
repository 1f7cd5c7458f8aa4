"""Sessions through the real SDK."""

from __future__ import annotations

import time

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import (
    OperationTimeoutError,
    ServiceBusError,
    SessionCannotBeLockedError,
    SessionLockLostError,
)

from sbnotebook.emulator import Emulator
from tests.helpers import QuickCloseClient


def _send(client: ServiceBusClient, queue: str, *pairs: tuple[str, str]) -> None:
    with client.get_queue_sender(queue) as s:
        s.send_messages([ServiceBusMessage(body, session_id=sid) for sid, body in pairs])


def test_session_receiver_gets_only_its_session_in_order(client: ServiceBusClient) -> None:
    """Rule: a session receiver receives only its session's messages, in order."""
    _send(client, "sq", ("a", "a1"), ("b", "b1"), ("a", "a2"), ("a", "a3"), ("b", "b2"))
    with client.get_queue_receiver("sq", session_id="a", max_wait_time=2) as r:
        assert r.session.session_id == "a"
        got = r.receive_messages(max_message_count=10, max_wait_time=30)
        assert [str(m) for m in got] == ["a1", "a2", "a3"]
        assert all(m.session_id == "a" for m in got)
        r.abandon_message(got[0])
        for m in got[1:]:
            r.complete_message(m)
        (again,) = r.receive_messages(max_message_count=10, max_wait_time=30)
        assert str(again) == "a1" and again.delivery_count == 1
        r.complete_message(again)


def test_next_available_session_and_exclusive_lock(emulator) -> None:  # type: ignore[no-untyped-def]
    """Rule: next-available locks a session with messages; a locked session cannot be accepted again.
    (On sq60, with a 1-minute lock: a 2 s lock could lapse on a busy host before the second accept.)"""
    client = QuickCloseClient.from_connection_string(emulator.connection_string, retry_total=0)
    _send(client, "sq60", ("x", "x1"))
    with client.get_queue_receiver("sq60", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=2) as r:
        assert r.session.session_id == "x"
        assert r.session.locked_until_utc is not None
        with pytest.raises(SessionCannotBeLockedError):
            with client.get_queue_receiver("sq60", session_id="x", max_wait_time=2) as other:
                other.receive_messages(max_wait_time=1)
        (m,) = r.receive_messages(max_wait_time=30)
        r.complete_message(m)
    client.close()


def test_next_available_times_out_when_nothing_is_free(emulator) -> None:  # type: ignore[no-untyped-def]
    """Rule: with no free session, accepting the next one ends in OperationTimeoutError."""
    with QuickCloseClient.from_connection_string(emulator.connection_string, retry_total=0) as c:
        start = time.monotonic()
        with pytest.raises(OperationTimeoutError):
            with c.get_queue_receiver("sq", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1) as r:
                r.receive_messages(max_wait_time=1)
        assert time.monotonic() - start < 20


def test_session_state_and_listing(client: ServiceBusClient) -> None:
    """Rule: session state is stored per session; sessions with messages or state are listed."""
    _send(client, "sq", ("s1", "m"), ("s2", "m"))
    with client.get_queue_receiver("sq", session_id="s1", max_wait_time=2) as r:
        assert r.session.get_state() in (None, b"")
        r.session.set_state(b"checkpoint-7")
        assert r.session.get_state() == b"checkpoint-7"
        (peeked,) = r.peek_messages(max_message_count=10, sequence_number=1)
        assert peeked.session_id == "s1"  # peek within a session
    assert sorted(client.list_queue_sessions("sq")) == ["s1", "s2"]


@pytest.mark.servicebus_clock("manual")  # the broker's time moves only with advance(): no race with a loaded machine
@pytest.mark.manual_clock_ahead  # settles on a short lock after advance(): tests/conftest.py
def test_session_lock_renewal_and_loss(quick_client: ServiceBusClient, emulator: Emulator) -> None:
    """Rule: renewing keeps the session; once its lock lapses, settling fails with SessionLockLostError."""
    _send(quick_client, "sq", ("r", "r1"), ("r", "r2"))
    with quick_client.get_queue_receiver("sq", session_id="r", max_wait_time=2) as r:
        first, second = r.receive_messages(max_message_count=2, max_wait_time=30)
        emulator.advance(1.2)
        r.session.renew_lock()
        emulator.advance(1.2)  # 2.4 s after accepting, with a 2 s lock: alive thanks to the renewal
        r.complete_message(first)
        emulator.advance(2.5)
        with pytest.raises(SessionLockLostError):
            r.complete_message(second)


def test_sending_without_session_id_is_refused(quick_client: ServiceBusClient) -> None:
    """Rule: a session-enabled entity only accepts messages with a session id."""
    with quick_client.get_queue_sender("sq") as s, pytest.raises(ServiceBusError, match="SessionId"):
        s.send_messages(ServiceBusMessage("no-session"))


def test_plain_receiver_on_session_entity_is_refused(emulator) -> None:  # type: ignore[no-untyped-def]
    with QuickCloseClient.from_connection_string(emulator.connection_string, retry_total=0) as c:
        with pytest.raises(ServiceBusError, match="sessionful"):
            with c.get_queue_receiver("sq", max_wait_time=1) as r:
                r.receive_messages(max_wait_time=1)


def test_session_subscription(client: ServiceBusClient) -> None:
    with client.get_topic_sender("st") as s:
        s.send_messages([ServiceBusMessage("t1", session_id="k"), ServiceBusMessage("t2", session_id="k")])
    with client.get_subscription_receiver("st", "s", session_id="k", max_wait_time=2) as r:
        got = r.receive_messages(max_message_count=5, max_wait_time=30)
        assert [str(m) for m in got] == ["t1", "t2"]
        for m in got:
            r.complete_message(m)


def _deferred_in_session(client: ServiceBusClient, session_id: str) -> int:
    """Send one message to sq60's ``session_id`` and defer it; its sequence number."""
    _send(client, "sq60", (session_id, "later"))
    with client.get_queue_receiver("sq60", session_id=session_id, max_wait_time=3) as r:
        (msg,) = r.receive_messages(max_wait_time=3)
        r.defer_message(msg)
    return int(msg.sequence_number)


def test_receive_deferred_needs_the_session_lock(quick_client: ServiceBusClient, emulator: Emulator) -> None:
    """Rule: a session receiver whose session lock was lost gets SessionLockLostError from
    receive_deferred_messages (the broker refuses receive-by-sequence-number), and the message stays
    deferred for the next holder of the session."""
    seq = _deferred_in_session(quick_client, "d")
    with quick_client.get_queue_receiver("sq60", session_id="d", max_wait_time=3) as r:
        assert emulator.lose_session_locks("sq60") == 1
        served = emulator.requests["com.microsoft:receive-by-sequence-number"]
        with pytest.raises(SessionLockLostError):
            r.receive_deferred_messages([seq])
        # the broker answered (not the SDK's own check of the lock time)
        assert emulator.requests["com.microsoft:receive-by-sequence-number"] == served + 1
    assert emulator.broker.counts("sq60") == {"active": 0, "deferred": 1, "scheduled": 0, "dead_letter": 0}
    with quick_client.get_queue_receiver("sq60", session_id="d", max_wait_time=3) as r:
        (again,) = r.receive_deferred_messages([seq])
        r.complete_message(again)
    assert emulator.broker.counts("sq60")["deferred"] == 0


def test_a_deferred_message_fetched_in_a_session_is_locked_by_the_session(
    quick_client: ServiceBusClient, emulator: Emulator
) -> None:
    """Rule: a deferred message received by a session receiver is locked by its session lock: when
    that lock is lost, settling it (update-disposition by lock token) fails with
    SessionLockLostError and the message stays deferred."""
    seq = _deferred_in_session(quick_client, "e")
    with quick_client.get_queue_receiver("sq60", session_id="e", max_wait_time=3) as r:
        (fetched,) = r.receive_deferred_messages([seq])
        assert emulator.lose_session_locks("sq60") == 1
        with pytest.raises(SessionLockLostError):
            r.complete_message(fetched)
    assert emulator.broker.counts("sq60") == {"active": 0, "deferred": 1, "scheduled": 0, "dead_letter": 0}


@pytest.mark.parametrize("operation", ["renew_lock", "get_state", "set_state", "receive_deferred"])
def test_session_operations_of_a_receiver_whose_session_is_held_elsewhere(
    quick_client: ServiceBusClient, emulator: Emulator, operation: str
) -> None:
    """Rule: once a receiver's session lock is lost and another receiver has accepted the session,
    the first one's renew, get/set state and receive-by-sequence-number fail with
    SessionLockLostError (the broker checks the receiver the request names, not only that someone
    holds the session); the state and the deferred message are left as they were."""
    seq = _deferred_in_session(quick_client, "h")
    with quick_client.get_queue_receiver("sq60", session_id="h", max_wait_time=3) as first:
        first.session.set_state(b"mine")
        assert emulator.lose_session_locks("sq60") == 1
        with quick_client.get_queue_receiver("sq60", session_id="h", max_wait_time=3) as second:
            calls = {
                "renew_lock": lambda: first.session.renew_lock(),
                "get_state": lambda: first.session.get_state(),
                "set_state": lambda: first.session.set_state(b"stale"),
                "receive_deferred": lambda: first.receive_deferred_messages([seq]),
            }
            before = sum(emulator.requests.values())
            with pytest.raises(SessionLockLostError):
                calls[operation]()
            assert sum(emulator.requests.values()) == before + 1  # the broker refused it
            assert second.session.get_state() == b"mine"
    assert emulator.broker.counts("sq60")["deferred"] == 1
