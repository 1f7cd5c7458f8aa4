"""Entity features through the real SDK: TTL, duplicate detection, forwarding, topics and rules, auth."""

from __future__ import annotations

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus import ServiceBusReceiveMode as Mode
from azure.servicebus.exceptions import ServiceBusAuthenticationError, ServiceBusError

from sbnotebook.emulator import Emulator
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import QuickCloseClient, drain, send


@pytest.mark.servicebus_clock("manual")  # the broker's time moves only with advance(): no race with a loaded machine
def test_expired_message_is_dead_lettered_when_configured(client: ServiceBusClient, emulator: Emulator) -> None:
    """Rule: with DeadLetteringOnMessageExpiration, an expired message goes to the DLQ with
    reason TTLExpiredException."""
    send(client, "ttl-dl", "stale")  # DefaultMessageTimeToLive PT1S
    emulator.advance(1.5)
    assert drain(client, "ttl-dl", wait=0.5) == []
    (dead,) = drain(client, "ttl-dl", sub_queue=ServiceBusSubQueue.DEAD_LETTER, count=1)
    assert str(dead) == "stale"
    assert dead.dead_letter_reason == "TTLExpiredException"


@pytest.mark.servicebus_clock("manual")  # the broker's time moves only with advance(): no race with a loaded machine
def test_expired_message_is_dropped_by_default(client: ServiceBusClient, emulator: Emulator) -> None:
    """Rule: without dead-lettering on expiry, an expired message is silently removed."""
    send(client, "ttl-drop", "gone")
    emulator.advance(1.5)
    assert drain(client, "ttl-drop", wait=0.5) == []
    assert drain(client, "ttl-drop", sub_queue=ServiceBusSubQueue.DEAD_LETTER, wait=0.5) == []


@pytest.mark.servicebus_clock("manual")  # the broker's time moves only with advance(): no race with a loaded machine
def test_message_ttl_shorter_than_entity_default_wins(client: ServiceBusClient, emulator: Emulator) -> None:
    """Rule: the effective TTL is the smaller of the message's and the entity's."""
    import datetime as dt

    with client.get_queue_sender("q") as s:
        s.send_messages(ServiceBusMessage("brief", time_to_live=dt.timedelta(seconds=1)))
        s.send_messages(ServiceBusMessage("lasting"))
    emulator.advance(1.5)
    assert [str(m) for m in drain(client, "q", wait=0.5, count=1)] == ["lasting"]


def test_duplicate_detection_drops_repeated_message_ids(client: ServiceBusClient) -> None:
    """Rule: with RequiresDuplicateDetection, a message id seen within the window is accepted
    but not enqueued again."""
    with client.get_queue_sender("dedup") as s:
        s.send_messages(ServiceBusMessage("first", message_id="same"))
        s.send_messages(ServiceBusMessage("second", message_id="same"))
        s.send_messages(ServiceBusMessage("other", message_id="different"))
    assert [str(m) for m in drain(client, "dedup")] == ["first", "other"]


def test_without_duplicate_detection_repeated_ids_are_kept(client: ServiceBusClient) -> None:
    """Rule: duplicate detection is off unless the entity asks for it."""
    with client.get_queue_sender("q") as s:
        s.send_messages([ServiceBusMessage("a", message_id="same"), ServiceBusMessage("b", message_id="same")])
    assert [str(m) for m in drain(client, "q")] == ["a", "b"]


def test_forward_to_moves_messages_on_arrival(client: ServiceBusClient) -> None:
    """Rule: ForwardTo moves each arriving message to the target entity."""
    send(client, "fwd-src", "hop")
    assert [str(m) for m in drain(client, "fwd-dst")] == ["hop"]


def test_a_queue_that_forwards_refuses_a_receiver(client: ServiceBusClient) -> None:
    """Rule (Service Bus): an entity with ForwardTo cannot be received from; its dead-letter queue can."""
    with pytest.raises(ServiceBusError, match="auto-forwards to 'fwd-dst'"):
        with client.get_queue_receiver("fwd-src", max_wait_time=1) as r:
            r.receive_messages(max_wait_time=1)
    assert drain(client, "fwd-src", sub_queue=ServiceBusSubQueue.DEAD_LETTER, wait=0.5) == []


def test_forward_dead_lettered_messages_to_another_entity(client: ServiceBusClient) -> None:
    """Rule: ForwardDeadLetteredMessagesTo sends dead-lettered messages to the target, which
    records where they were dead-lettered (x-opt-deadletter-source)."""
    send(client, "dl-fwd", "fails-once")  # MaxDeliveryCount 1
    with client.get_queue_receiver("dl-fwd", max_wait_time=3) as r:
        (m,) = r.receive_messages(max_wait_time=3)
        r.abandon_message(m)
    (moved,) = drain(client, "dl-target", count=1)
    assert str(moved) == "fails-once"
    assert moved.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert moved.dead_letter_source == "dl-fwd"
    assert drain(client, "dl-fwd", sub_queue=ServiceBusSubQueue.DEAD_LETTER, wait=0.5) == []


def _sub_bodies(client: ServiceBusClient, sub: str) -> list[str]:
    with client.get_subscription_receiver("t", sub, receive_mode=Mode.RECEIVE_AND_DELETE, max_wait_time=1) as r:
        out: list[str] = []
        while batch := r.receive_messages(max_message_count=50, max_wait_time=1):
            out.extend(str(m) for m in batch)
        return out


def test_topic_fans_out_through_sql_and_correlation_rules(client: ServiceBusClient) -> None:
    """Rule: every subscription whose rule matches gets its own copy; $Default takes all."""
    with client.get_topic_sender("t") as s:
        s.send_messages(
            [
                ServiceBusMessage("red-big", application_properties={"color": "red", "size": 5}),
                ServiceBusMessage("red-small", application_properties={"color": "red", "size": 1}),
                ServiceBusMessage("eu-order", subject="order", application_properties={"region": "eu"}),
                ServiceBusMessage("us-order", subject="order", application_properties={"region": "us"}),
            ]
        )
    assert _sub_bodies(client, "all") == ["red-big", "red-small", "eu-order", "us-order"]
    assert _sub_bodies(client, "sql") == ["red-big"]
    assert _sub_bodies(client, "corr") == ["eu-order"]


def test_subscription_settlement_and_dead_letter_queue(client: ServiceBusClient) -> None:
    """Rule: a subscription is a queue of its own, with its own DLQ."""
    with client.get_topic_sender("t") as s:
        s.send_messages(ServiceBusMessage("sub-msg"))
    with client.get_subscription_receiver("t", "all", max_wait_time=3) as r:
        (m,) = r.receive_messages(max_wait_time=3)
        r.dead_letter_message(m, reason="Nope")
    with client.get_subscription_receiver("t", "all", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=3) as dlq:
        (d,) = dlq.receive_messages(max_wait_time=3)
        assert d.dead_letter_reason == "Nope"
        dlq.complete_message(d)


def test_wrong_key_is_refused_and_gets_no_access(emulator: Emulator) -> None:
    """Rule: CBS put-token with a signature from another key -> ServiceBusAuthenticationError,
    and nothing reaches the entity."""
    bad = emulator.connection_string.replace("SAS_KEY_VALUE", "not-the-key")
    with QuickCloseClient.from_connection_string(bad, retry_total=0) as c:
        with pytest.raises(ServiceBusAuthenticationError), c.get_queue_sender("q") as s:
            s.send_messages(ServiceBusMessage("intruder"))
    assert emulator.broker.counts("q")["active"] == 0


def test_wrong_key_name_is_refused(emulator: Emulator) -> None:
    """Rule: tokens name their key (skn); an unknown key name is refused."""
    bad = emulator.connection_string.replace("RootManageSharedAccessKey", "SomeoneElse")
    with QuickCloseClient.from_connection_string(bad, retry_total=0) as c:
        with pytest.raises(ServiceBusAuthenticationError), c.get_queue_receiver("q") as r:
            r.receive_messages(max_wait_time=1)


def test_custom_key() -> None:
    """The emulator can require a key of the user's choosing (--key)."""
    with Emulator(TEST_TOPOLOGY, key="my-own-key") as emu:
        assert "SharedAccessKey=my-own-key" in emu.connection_string
        with QuickCloseClient.from_connection_string(emu.connection_string) as c:
            send(c, "q", "ok")
            assert [str(m) for m in drain(c, "q")] == ["ok"]
        assert "my-own-key" not in repr(emu)
