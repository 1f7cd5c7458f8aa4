"""Service Bus behaviour that clients other than the Python SDK's defaults rely on, seen through the
Python SDK: broker-stamped message ids, SQL filter parameters, topic filter counts.
(The JavaScript SDK's view of the same is in test_js_sdk.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode, ServiceBusSubQueue
from azure.servicebus.amqp import AmqpAnnotatedMessage
from azure.servicebus.management import (
    CorrelationRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
)

from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import drain, subscription_with_one_rule

RECEIVE_AND_DELETE = ServiceBusReceiveMode.RECEIVE_AND_DELETE
GUID_N = re.compile(r"^[0-9a-f]{32}$")


def _send_without_id(client: ServiceBusClient, entity: str, *bodies: bytes) -> None:
    # ServiceBusMessage always carries an id; an AMQP message sends none unless given one.
    with client.get_queue_sender(entity) as sender:
        sender.send_messages([AmqpAnnotatedMessage(data_body=b) for b in bodies])


def test_the_broker_stamps_an_id_that_the_message_keeps(client: ServiceBusClient) -> None:
    _send_without_id(client, "q", b"one", b"two")
    with client.get_queue_receiver("q", max_wait_time=2) as receiver:
        peeked = [m.message_id for m in receiver.peek_messages(10)]
        received = receiver.receive_messages(2, max_wait_time=30)
        ids = [m.message_id for m in received]
        assert len(ids) == 2 and all(GUID_N.match(str(i)) for i in ids), ids
        assert len(set(ids)) == 2
        assert peeked == ids
        receiver.dead_letter_message(received[0], reason="test")
        receiver.complete_message(received[1])
    dead = drain(client, "q", sub_queue=ServiceBusSubQueue.DEAD_LETTER, wait=0.5)
    assert [m.message_id for m in dead] == ids[:1]


def test_a_forwarded_message_keeps_its_stamped_id(client: ServiceBusClient) -> None:
    _send_without_id(client, "fwd-src", b"hop")
    [message] = drain(client, "fwd-dst", wait=0.5)
    assert GUID_N.match(str(message.message_id))


def test_messages_without_ids_are_not_duplicates_of_each_other(client: ServiceBusClient) -> None:
    _send_without_id(client, "dedup", b"a", b"b")
    assert sorted(str(m) for m in drain(client, "dedup", wait=0.5)) == ["a", "b"]


def test_sql_filter_and_action_parameters(
    client: ServiceBusClient, admin: ServiceBusAdministrationClient, emulator: Emulator
) -> None:
    subscription_with_one_rule(
        admin,
        "t",
        "params",
        "by-color",
        filter=SqlRuleFilter("color = @color AND size > @min", parameters={"@color": "red", "@min": 3}),
        action=SqlRuleAction("SET tag = @tag", parameters={"@tag": "big red"}),
    )
    rule = admin.get_rule("t", "params", "by-color")
    assert rule.filter.parameters == {"@color": "red", "@min": 3}
    assert rule.action.parameters == {"@tag": "big red"}
    with client.get_topic_sender("t") as sender:
        sender.send_messages(
            [
                ServiceBusMessage("hit", application_properties={"color": "red", "size": 5}),
                ServiceBusMessage("small", application_properties={"color": "red", "size": 1}),
                ServiceBusMessage("blue", application_properties={"color": "blue", "size": 9}),
            ]
        )
    with client.get_subscription_receiver("t", "params", receive_mode=RECEIVE_AND_DELETE) as receiver:
        got = receiver.receive_messages(10, max_wait_time=30)
    assert [(str(m), m.application_properties[b"tag"]) for m in got] == [("hit", b"big red")]


def test_a_parameter_without_a_value_is_refused(admin: ServiceBusAdministrationClient) -> None:
    admin.create_subscription("t", "params")
    with pytest.raises(HttpResponseError, match="@color"):
        admin.create_rule("t", "params", "unset", filter=SqlRuleFilter("color = @color"))


def test_topic_runtime_properties_count_filters(admin: ServiceBusAdministrationClient) -> None:
    # The test topology's topic 't': $Default (true) on 'all', a SQL rule on 'sql', a correlation rule on 'corr'.
    before = admin.get_topic_runtime_properties("t")
    assert (before.sql_filter_count, before.correlation_filter_count) == (2, 1)
    admin.create_rule("t", "all", "more", filter=CorrelationRuleFilter(label="x"))
    after = admin.get_topic_runtime_properties("t")
    assert (after.sql_filter_count, after.correlation_filter_count) == (2, 2)


def test_rule_parameters_survive_a_restart(tmp_path: Path) -> None:
    rule_filter = SqlRuleFilter("color = @color", parameters={"@color": "red"})
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu, emulator_admin_client(emu.connection_string) as admin:
        admin.create_rule("t", "all", "by-color", filter=rule_filter)
    with Emulator(TEST_TOPOLOGY, data_dir=tmp_path) as emu, emulator_admin_client(emu.connection_string) as admin:
        assert admin.get_rule("t", "all", "by-color").filter.parameters == {"@color": "red"}
