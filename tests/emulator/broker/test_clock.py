"""The manual clock (issue 54): ``Emulator(clock="manual")`` and ``advance()`` through the real SDK.

Durations are Azure's own (a 1-minute lock, an hour's TTL, a day-ahead schedule) and no test sleeps
through one: each moves the clock and reads the broker's state back (peek, counts, what a new
receiver gets). ``advance()`` fires what fell due before it returns, so nothing here waits for it.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import MessageLockLostError, SessionCannotBeLockedError, SessionLockLostError

from sbnotebook.emulator import ClockError, Emulator
from sbnotebook.emulator.security.sas import DEFAULT_KEY, DEFAULT_KEY_NAME, sign
from tests.emulator.net.rawpeers import http_reply
from tests.helpers import QuickCloseClient, emulator_config

pytestmark = pytest.mark.timeout(60)

TOPOLOGY = emulator_config(
    "clockns",
    {
        "orders": {"LockDuration": "PT1M", "MaxDeliveryCount": 2},
        "expiring-dl": {"DefaultMessageTimeToLive": "PT1H", "DeadLetteringOnMessageExpiration": True},
        "expiring": {"DefaultMessageTimeToLive": "PT1H"},
        "dedup": {"RequiresDuplicateDetection": True, "DuplicateDetectionHistoryTimeWindow": "PT10M"},
        "carts": {"RequiresSession": True, "LockDuration": "PT1M"},
    },
)


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(TOPOLOGY, clock="manual", admin_port=None) as emulator:
        yield emulator


@pytest.fixture
def client(emu: Emulator) -> Iterator[ServiceBusClient]:
    with QuickCloseClient.from_connection_string(emu.connection_string, retry_total=0) as c:
        yield c


def _send(client: ServiceBusClient, queue: str, *messages: ServiceBusMessage) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(list(messages))


def _lock_held(emu: Emulator, queue: str, seq: int) -> bool:
    (msg,) = emu.broker.peek(emu.broker.resolve_source(queue), seq, 1)
    return msg.lock_token is not None


def test_a_lock_expires_when_the_clock_passes_it_and_the_message_comes_back_counted(
    emu: Emulator, client: ServiceBusClient
) -> None:
    _send(client, "orders", ServiceBusMessage("o-1"))
    with client.get_queue_receiver("orders") as receiver:
        (m,) = receiver.receive_messages(max_wait_time=5)
        emu.advance(timedelta(seconds=59))
        assert _lock_held(emu, "orders", m.sequence_number)  # a second before its end: still held
        emu.advance(2)
        assert not _lock_held(emu, "orders", m.sequence_number)
        (peeked,) = receiver.peek_messages(sequence_number=m.sequence_number)
        assert peeked.delivery_count == 1
        with pytest.raises(MessageLockLostError):
            receiver.complete_message(m)
        (again,) = receiver.receive_messages(max_wait_time=5)
        assert (again.sequence_number, again.delivery_count) == (m.sequence_number, 1)
        # MaxDeliveryCount 2: the second lock to lapse dead-letters it, as Service Bus does
        emu.advance("61s")
    assert emu.broker.counts("orders") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 1}
    with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (dead,) = dlq.receive_messages(max_wait_time=5)
        assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
        dlq.complete_message(dead)


def test_time_to_live_dead_letters_when_the_queue_says_so_and_drops_otherwise(
    emu: Emulator, client: ServiceBusClient
) -> None:
    for queue in ("expiring-dl", "expiring"):
        _send(client, queue, ServiceBusMessage("hour"), ServiceBusMessage("five", time_to_live=timedelta(minutes=5)))
    emu.advance(timedelta(minutes=5, seconds=1))  # the message's own TTL, shorter than the queue's
    assert emu.broker.counts("expiring-dl")["dead_letter"] == 1
    assert emu.broker.counts("expiring")["active"] == 1
    emu.advance(timedelta(minutes=55))
    assert emu.broker.counts("expiring-dl") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 2}
    assert emu.broker.counts("expiring") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 0}
    with client.get_queue_receiver("expiring-dl", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        dead = dlq.peek_messages(max_message_count=5, sequence_number=1)
    assert sorted(str(m) for m in dead) == ["five", "hour"]
    assert {m.dead_letter_reason for m in dead} == {"TTLExpiredException"}
    with client.get_queue_receiver("expiring") as receiver:
        assert receiver.peek_messages(max_message_count=5, sequence_number=1) == []


def test_a_message_scheduled_a_day_ahead_becomes_active_at_its_time(emu: Emulator, client: ServiceBusClient) -> None:
    tomorrow = emu.now() + timedelta(days=1)
    with client.get_queue_sender("orders") as sender:
        (scheduled_as,) = sender.schedule_messages(ServiceBusMessage("remind"), tomorrow)
    emu.advance(timedelta(hours=23, minutes=59))
    assert emu.broker.counts("orders")["scheduled"] == 1
    with client.get_queue_receiver("orders") as receiver:
        (waiting,) = receiver.peek_messages(sequence_number=scheduled_as)
        assert abs(waiting.scheduled_enqueue_time_utc - tomorrow) < timedelta(milliseconds=1)
        emu.advance(timedelta(minutes=2))
        assert emu.broker.counts("orders")["active"] == 1
        (m,) = receiver.receive_messages(max_wait_time=5)
        # enqueued at its scheduled time (not when the clock got there), with a new sequence number
        assert abs(m.enqueued_time_utc - tomorrow) < timedelta(milliseconds=1)
        assert m.sequence_number != scheduled_as
        receiver.complete_message(m)


def test_a_session_lock_lapses_and_the_session_is_free_again(emu: Emulator, client: ServiceBusClient) -> None:
    _send(client, "carts", ServiceBusMessage("add", session_id="c-1"))
    with client.get_queue_receiver("carts", session_id="c-1") as holder:
        (m,) = holder.receive_messages(max_wait_time=5)
        with pytest.raises(SessionCannotBeLockedError):  # held: nobody else may accept it
            with client.get_queue_receiver("carts", session_id="c-1") as other:
                other.receive_messages(max_wait_time=1)
        emu.advance(timedelta(seconds=61))
        with pytest.raises(SessionLockLostError):
            holder.complete_message(m)
    with client.get_queue_receiver("carts", session_id="c-1") as next_one:
        (again,) = next_one.receive_messages(max_wait_time=5)
        assert (str(again), again.delivery_count) == ("add", 1)
        next_one.complete_message(again)
    assert emu.broker.counts("carts")["active"] == 0


def test_the_duplicate_detection_window_moves_with_the_clock(emu: Emulator, client: ServiceBusClient) -> None:
    _send(client, "dedup", ServiceBusMessage("a", message_id="m-1"))
    emu.advance(timedelta(minutes=9))
    _send(client, "dedup", ServiceBusMessage("a again", message_id="m-1"))  # inside the window: dropped
    assert emu.broker.counts("dedup")["active"] == 1
    emu.advance(timedelta(minutes=10))
    _send(client, "dedup", ServiceBusMessage("a later", message_id="m-1"))
    with client.get_queue_receiver("dedup") as receiver:
        kept = receiver.peek_messages(max_message_count=5, sequence_number=1)
    assert [str(m) for m in kept] == ["a", "a later"]


def test_every_time_the_broker_reports_follows_its_clock(emu: Emulator, client: ServiceBusClient) -> None:
    emu.advance(timedelta(days=1))
    now = emu.now()
    assert now - datetime.now(UTC) > timedelta(hours=23)
    _send(client, "expiring", ServiceBusMessage("x", time_to_live=timedelta(minutes=30)))
    with client.get_queue_receiver("expiring") as receiver:
        (m,) = receiver.receive_messages(max_wait_time=5)
        assert abs(m.enqueued_time_utc - now) < timedelta(seconds=1)
        assert abs(m.expires_at_utc - (now + timedelta(minutes=30))) < timedelta(seconds=1)
        (stored,) = emu.broker.peek(emu.broker.resolve_source("expiring"), 1, 1)  # the broker's own
        assert abs(stored.expires_at - (now + timedelta(minutes=30)).timestamp()) < 1
        assert abs(m.locked_until_utc - (now + timedelta(minutes=1))) < timedelta(seconds=1)
        emu.advance(30)
        renewed = receiver.renew_message_lock(m)
        assert abs(renewed - (now + timedelta(seconds=90))) < timedelta(seconds=1)
        receiver.complete_message(m)


def test_tokens_keep_real_time_an_advanced_week_expires_none(emu: Emulator, client: ServiceBusClient) -> None:
    _send(client, "orders", ServiceBusMessage("before"))
    # a token valid for one more real minute, signed now
    token = sign(f"sb://127.0.0.1:{emu.port}/", DEFAULT_KEY_NAME, DEFAULT_KEY, time.time() + 60)
    emu.advance(timedelta(days=7))
    _send(client, "orders", ServiceBusMessage("after"))  # the client's own token, on its connection
    request = urllib.request.Request(f"{emu.admin_url}/$namespaceinfo", headers={"Authorization": token})
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert reply.status == 200
    assert emu.broker.counts("orders")["active"] == 2


def test_advance_from_many_threads_moves_the_clock_by_their_sum(emu: Emulator) -> None:
    start = emu.clock.now()
    threads = [threading.Thread(target=lambda: [emu.advance(1) for _ in range(50)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert emu.clock.now() - start == 200


def test_advance_takes_the_kits_durations_and_refuses_the_rest(emu: Emulator) -> None:
    start = emu.clock.now()
    assert emu.advance("90s") == emu.now()
    emu.advance("10m")
    emu.advance(timedelta(hours=2))
    emu.advance("1d")
    emu.advance(0.5)
    assert emu.clock.now() - start == 90 + 600 + 7200 + 86400 + 0.5
    for bad in (-1, "soon", "-5m", timedelta(seconds=-1)):
        with pytest.raises(ValueError):
            emu.advance(bad)
    assert emu.clock.now() - start == 90 + 600 + 7200 + 86400 + 0.5


def test_the_system_clock_refuses_to_advance_in_one_line_saying_how_to_ask_for_the_manual_one() -> None:
    with Emulator(TOPOLOGY, admin_port=None) as emu:
        assert emu.clock_kind == "system"
        assert abs(emu.now() - datetime.now(UTC)) < timedelta(seconds=5)
        with pytest.raises(ClockError) as refused:
            emu.advance(60)
    text = str(refused.value)
    assert "\n" not in text
    assert "clock='manual'" in text and "--clock manual" in text and "servicebus_clock('manual')" in text


def test_a_manual_clock_starts_at_real_now_and_advances_before_start_too() -> None:
    emu = Emulator(TOPOLOGY, clock="manual", admin_port=None)
    assert abs(emu.now() - datetime.now(UTC)) < timedelta(seconds=5)
    then = emu.advance("1h")
    with emu:
        assert emu.now() == then  # it did not move on its own while starting


def _clock_request(emu: Emulator, method: str, query: str = "", token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": token} if token is not None else {}
    request = urllib.request.Request(f"{emu.admin_url}/$emulator/clock{query}", method=method, headers=headers)
    return http_reply(request)


def test_the_clock_endpoint_takes_the_namespaces_manage_right_only(emu: Emulator) -> None:
    """/$emulator/clock (what --advance and --status use): read and advanced with Manage on the
    namespace; refused without a token, with a Send-only key, or with another method."""
    audience = f"sb://127.0.0.1:{emu.port}/"
    root = sign(audience, DEFAULT_KEY_NAME, DEFAULT_KEY, time.time() + 60)
    sender = emu.add_policy("sender", ["Send"])
    send_only = sign(audience, "sender", sender.primary_key, time.time() + 60)
    start = emu.clock.now()
    assert _clock_request(emu, "POST", "?advance=60")[0] == 401
    assert _clock_request(emu, "POST", "?advance=60", send_only)[0] == 401
    assert emu.clock.now() == start
    status, body = _clock_request(emu, "POST", "?advance=10m", root)
    assert status == 200 and "<Kind>manual</Kind>" in body
    assert emu.clock.now() == start + 600
    assert emu.now().strftime("%Y-%m-%dT%H:%M:%S") in _clock_request(emu, "GET", token=root)[1]
    assert _clock_request(emu, "PUT", token=root)[0] == 405
    assert _clock_request(emu, "POST", "?advance=soon", root)[0] == 400
    assert emu.clock.now() == start + 600
