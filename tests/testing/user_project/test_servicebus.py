"""A user's test module, as a project that installed the kit writes it: the plugin's fixtures, the
real SDK, a queue and a topic with two subscriptions. Its clients are built for any mode of the plugin
(plain, ``--servicebus-tls``).

Not a test of this repository (tests/testing/conftest.py leaves it out of collection): the tests
that run other projects copy it into theirs, tests/testing/test_plugin.py (a pytester project) and
tests/testing/test_plugin_project.py (a throwaway project in a venv that installed the kit).
``record`` writes what a test saw to the file ``SB_RECORD`` names, for the test that ran the project.
"""

import json
import os
import time

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusQuotaExceededError

pytestmark = pytest.mark.servicebus_topology(queues=["orders"], topics={"events": ["audit", "billing"]})


def record(**fields):
    with open(os.environ["SB_RECORD"], "a") as f:
        f.write(json.dumps(fields) + "\n")


def test_queue(servicebus_connection_string, servicebus_namespace, servicebus_emulator):
    record(test="queue", port=servicebus_emulator.port, pid=os.getpid())
    # client_options: what the mode needs (under --servicebus-tls, the port and the CA)
    options = servicebus_namespace.client_options
    with ServiceBusClient.from_connection_string(servicebus_connection_string, **options) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("o-1"))
        with client.get_queue_receiver("orders", max_wait_time=5) as receiver:
            [message] = receiver.receive_messages(max_wait_time=5)
            assert str(message) == "o-1"
            receiver.complete_message(message)
    assert servicebus_emulator.broker.counts("orders")["active"] == 0


def test_topic_with_two_subscriptions(servicebus_client, servicebus_emulator):
    with servicebus_client.get_topic_sender("events") as sender:
        sender.send_messages(ServiceBusMessage("e-1"))
    for subscription in ("audit", "billing"):
        with servicebus_client.get_subscription_receiver("events", subscription, max_wait_time=5) as receiver:
            [message] = receiver.receive_messages(max_wait_time=5)
            assert str(message) == "e-1"
            receiver.complete_message(message)


def test_refused_send(servicebus_emulator, servicebus_namespace):
    servicebus_emulator.reject_sends("orders", 1, "quota-exceeded")
    with servicebus_namespace.client(retry_total=0) as client:
        with client.get_queue_sender("orders") as sender:
            with pytest.raises(ServiceBusQuotaExceededError):
                sender.send_messages(ServiceBusMessage("refused"))
            assert servicebus_emulator.broker.counts("orders")["active"] == 0
            sender.send_messages(ServiceBusMessage("accepted"))  # only the one send was refused
    assert servicebus_emulator.broker.counts("orders")["active"] == 1


@pytest.mark.parametrize("n", [1, 2])
def test_fresh_namespace(servicebus_client, servicebus_emulator, n):
    with servicebus_client.get_queue_receiver("orders") as receiver:
        assert receiver.peek_messages(max_message_count=10) == []
    with servicebus_client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage(f"left behind by {n}"))
    record(test="fresh", port=servicebus_emulator.port, pid=os.getpid())


def test_timed_send(servicebus_client, servicebus_emulator):
    with servicebus_client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("warm-up"))
        start = time.perf_counter()
        sender.send_messages(ServiceBusMessage("timed"))
        took = time.perf_counter() - start
    record(test="timed", seconds=took, latency_ms=servicebus_emulator.latency_ms, port=servicebus_emulator.port)
    assert took >= servicebus_emulator.latency_ms / 1000
