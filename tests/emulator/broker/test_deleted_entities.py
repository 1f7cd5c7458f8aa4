"""Links of a deleted entity are detached, as Service Bus detaches them: a client attached to a queue,
topic or subscription that is deleted (and perhaps made again under its name) hears of it on its
next call, instead of reading the deleted entity's empty stores or sending into nothing."""

from __future__ import annotations

import time

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import MessagingEntityNotFoundError, ServiceBusError
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook.emulator import Emulator
from tests.helpers import send

BOUND = 15.0  # seconds: the error comes at once; a receiver left attached would wait out its 30 s


def _fails_not_found(call: object) -> MessagingEntityNotFoundError:
    started = time.monotonic()
    with pytest.raises(MessagingEntityNotFoundError) as caught:
        call()  # type: ignore[operator]
    assert time.monotonic() - started < BOUND
    return caught.value


def test_a_receiver_of_a_deleted_queue_gets_not_found_on_its_next_receive(
    emulator: Emulator, client: ServiceBusClient, admin: ServiceBusAdministrationClient
) -> None:
    """Rule: deleting a queue detaches its receivers with amqp:not-found and Service Bus's words;
    the SDK raises MessagingEntityNotFoundError on the next receive (not an empty list after the wait)."""
    with client.get_queue_receiver("q", max_wait_time=30) as receiver:
        receiver.peek_messages(1)  # the receive link and $management attached
        admin.delete_queue("q")
        assert "q" not in [e.name for e in emulator.broker.entities]
        error = _fails_not_found(lambda: receiver.receive_messages(max_wait_time=30))
        assert "amqp:not-found" in str(error)
        assert "The messaging entity 'sb://" in str(error) and "/q' could not be found." in str(error)
        assert "https://aka.ms/sbResourceMgrExceptions" in str(error)


def test_the_same_clients_work_again_once_the_queue_is_made_again(
    emulator: Emulator, client: ServiceBusClient, admin: ServiceBusAdministrationClient
) -> None:
    """Rule: after the error, the SDK reattaches on its next call: the receiver and sender of the deleted
    queue reach the queue made again under its name."""
    send(client, "q", "old")
    with client.get_queue_receiver("q", max_wait_time=5) as receiver, client.get_queue_sender("q") as sender:
        receiver.peek_messages(1)
        sender.send_messages(ServiceBusMessage("before"))
        admin.delete_queue("q")
        admin.create_queue("q")
        with pytest.raises(MessagingEntityNotFoundError):
            receiver.receive_messages(max_wait_time=5)  # the detach is heard once
        sender.send_messages(ServiceBusMessage("after"))  # the SDK reattaches the sender itself
        assert emulator.broker.counts("q")["active"] == 1  # in the new queue; "old" and "before" went with the old
        (message,) = receiver.receive_messages(max_wait_time=5)
        assert str(message) == "after"
        receiver.complete_message(message)
    assert emulator.broker.counts("q")["active"] == 0


def test_deleting_a_topic_detaches_its_subscriptions_and_dead_letter_receivers(
    client: ServiceBusClient, admin: ServiceBusAdministrationClient
) -> None:
    """Rule: a topic's deletion takes its subscriptions with it: their receivers, dead-letter ones
    included, get MessagingEntityNotFoundError on their next receive."""
    with (
        client.get_subscription_receiver("t", "all", max_wait_time=30) as sub,
        client.get_subscription_receiver("t", "sql", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=30) as dlq,
    ):
        sub.peek_messages(1)
        dlq.peek_messages(1)
        admin.delete_topic("t")
        _fails_not_found(lambda: sub.receive_messages(max_wait_time=30))
        _fails_not_found(lambda: dlq.receive_messages(max_wait_time=30))


def test_deleting_a_subscription_leaves_the_topic_and_its_other_subscriptions_attached(
    emulator: Emulator, client: ServiceBusClient, admin: ServiceBusAdministrationClient
) -> None:
    """Rule: only the links of what was deleted are detached."""
    with (
        client.get_subscription_receiver("t", "sql", max_wait_time=30) as gone,
        client.get_subscription_receiver("t", "all", max_wait_time=5) as kept,
        client.get_topic_sender("t") as sender,
    ):
        gone.peek_messages(1)
        kept.peek_messages(1)
        sender.send_messages(ServiceBusMessage("one"))
        admin.delete_subscription("t", "sql")
        _fails_not_found(lambda: gone.receive_messages(max_wait_time=30))
        sender.send_messages(ServiceBusMessage("two"))
        assert emulator.broker.counts("t/Subscriptions/all")["active"] == 2
        assert sorted(str(m) for m in kept.receive_messages(max_message_count=2, max_wait_time=5)) == ["one", "two"]


def test_a_session_receiver_of_a_deleted_queue_is_detached(
    client: ServiceBusClient, admin: ServiceBusAdministrationClient
) -> None:
    """Rule: a session receiver (holding its session) is detached as the others are."""
    send(client, "sq60", "in-a", session_id="a")
    with client.get_queue_receiver("sq60", session_id="a", max_wait_time=30) as receiver:
        receiver.peek_messages(1)
        admin.delete_queue("sq60")
        started = time.monotonic()
        with pytest.raises(ServiceBusError) as caught:  # the SDK ends a session receiver on any link error
            receiver.receive_messages(max_wait_time=30)
        assert time.monotonic() - started < BOUND
        assert "could not be found" in str(caught.value) or "not-found" in str(caught.value)


def test_the_management_link_of_a_deleted_queue_is_detached_too(
    emulator: Emulator, client: ServiceBusClient, admin: ServiceBusAdministrationClient
) -> None:
    """Rule: the $management link of a deleted queue is detached too (amqp:link:detach-forced, as Service
    Bus detaches it: azure-sdk-for-net#30028). The SDK reports that only as a failed management
    operation, once, even when the queue was made again meanwhile; its next request reattaches."""
    with client.get_queue_receiver("q", max_wait_time=5) as receiver:
        assert receiver.peek_messages(1) == []
        admin.delete_queue("q")
        admin.create_queue("q")
        send(client, "q", "new")
        started = time.monotonic()
        with pytest.raises(ServiceBusError, match="Management Operation error occurred"):
            receiver.peek_messages(1)  # left attached, the old link would have answered for the new queue
        assert time.monotonic() - started < BOUND
        assert [str(m) for m in receiver.peek_messages(1)] == ["new"]
    assert emulator.broker.counts("q")["active"] == 1


def test_a_management_request_after_the_deletion_ends_in_not_found(
    client: ServiceBusClient, admin: ServiceBusAdministrationClient
) -> None:
    """Rule: with the queue gone, the reattach is refused: MessagingEntityNotFoundError, within the bound."""
    with client.get_queue_receiver("q", max_wait_time=5) as receiver:
        receiver.peek_messages(1)
        admin.delete_queue("q")
        with pytest.raises(ServiceBusError, match="Management Operation error occurred"):
            receiver.peek_messages(1)
        _fails_not_found(lambda: receiver.peek_messages(1))
