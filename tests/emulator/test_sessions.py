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

from tests.helpers import QuickCloseClient


def _send(client: ServiceBusClient, queue: str, *pairs: tuple[str, str]) -> None:
    with client.get_queue_sender(queue) as s:
        s.send_messages([ServiceBusMessage(body, session_id=sid) for sid, body in pairs])


def test_session_receiver_gets_only_its_session_in_order(client: ServiceBusClient) -> None:
    """Rule: a session receiver receives only its session's messages, in order."""
    _send(client, "sq", ("a", "a1"), ("b", "b1"), ("a", "a2"), ("a", "a3"), ("b", "b2"))
    with client.get_queue_receiver("sq", session_id="a", max_wait_time=2) as r:
        assert r.session.session_id == "a"
        got = r.receive_messages(max_message_count=10, max_wait_time=2)
        assert [str(m) for m in got] == ["a1", "a2", "a3"]
        assert all(m.session_id == "a" for m in got)
        r.abandon_message(got[0])
        for m in got[1:]:
            r.complete_message(m)
        (again,) = r.receive_messages(max_message_count=10, max_wait_time=2)
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
        (m,) = r.receive_messages(max_wait_time=2)
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


def test_session_lock_renewal_and_loss(quick_client: ServiceBusClient) -> None:
    """Rule: renewing keeps the session; once its lock lapses, settling fails with SessionLockLostError."""
    _send(quick_client, "sq", ("r", "r1"), ("r", "r2"))
    with quick_client.get_queue_receiver("sq", session_id="r", max_wait_time=2) as r:
        first, second = r.receive_messages(max_message_count=2, max_wait_time=2)
        time.sleep(1.2)
        r.session.renew_lock()
        time.sleep(1.2)  # 2.4 s after accepting, with a 2 s lock: alive thanks to the renewal
        r.complete_message(first)
        time.sleep(2.5)
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
        got = r.receive_messages(max_message_count=5, max_wait_time=2)
        assert [str(m) for m in got] == ["t1", "t2"]
        for m in got:
            r.complete_message(m)
