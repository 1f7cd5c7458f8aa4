"""SqlRuleAction: SET / REMOVE applied to the messages a subscription rule admits."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus import ServiceBusReceiveMode as Mode
from azure.servicebus.management import ServiceBusAdministrationClient, SqlRuleAction, SqlRuleFilter, TrueRuleFilter

from sbnotebook.emulator import Emulator
from tests.helpers import subscription_with_one_rule

pytestmark = pytest.mark.timeout(120)


def _props(m: Any) -> dict[str, Any]:
    return {k.decode(): v.decode() if isinstance(v, bytes) else v for k, v in (m.application_properties or {}).items()}


def _receive_all(client: ServiceBusClient, topic: str, sub: str) -> list[Any]:
    with client.get_subscription_receiver(topic, sub, receive_mode=Mode.RECEIVE_AND_DELETE, max_wait_time=3) as r:
        out: list[Any] = []
        while batch := r.receive_messages(max_message_count=10, max_wait_time=2):
            out += batch
        return out


def test_set_and_remove_are_applied(admin: ServiceBusAdministrationClient, client: ServiceBusClient) -> None:
    admin.create_topic("acts")
    subscription_with_one_rule(
        admin,
        "acts",
        "s",
        "tag",
        filter=SqlRuleFilter("kind = 'order'"),
        action=SqlRuleAction("SET priority = 'high'; SET total = qty * 2; REMOVE secret"),
    )
    with client.get_topic_sender("acts") as s:
        s.send_messages(
            [
                ServiceBusMessage("o", application_properties={"kind": "order", "qty": 4, "secret": "x"}),
                ServiceBusMessage("n", application_properties={"kind": "note"}),
            ]
        )
    (m,) = _receive_all(client, "acts", "s")
    assert str(m) == "o"
    assert _props(m) == {"kind": "order", "qty": 4, "priority": "high", "total": 8, "RuleName": "tag"}
    assert admin.get_rule("acts", "s", "tag").action.sql_expression.startswith("SET priority")


def test_each_rule_with_an_action_makes_its_own_copy(
    admin: ServiceBusAdministrationClient, client: ServiceBusClient
) -> None:
    """Service Bus: rules without actions together give one copy; each matching rule with an
    action gives one more, carrying RuleName."""
    admin.create_topic("copies")
    admin.create_subscription("copies", "s")  # $Default: 1=1, no action
    admin.create_rule("copies", "s", "a", filter=TrueRuleFilter(), action=SqlRuleAction("SET via = 'a'"))
    admin.create_rule("copies", "s", "b", filter=SqlRuleFilter("n > 1"), action=SqlRuleAction("SET via = 'b'"))
    with client.get_topic_sender("copies") as s:
        s.send_messages(ServiceBusMessage("m", application_properties={"n": 2}))
    got = _receive_all(client, "copies", "s")
    assert sorted(_props(m).get("via", "-") for m in got) == ["-", "a", "b"]
    assert len({m.sequence_number for m in got}) == 3


def test_actions_from_the_topology_file_async() -> None:
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    topology = {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "n",
                    "Topics": [
                        {
                            "Name": "t",
                            "Subscriptions": [
                                {
                                    "Name": "s",
                                    "Rules": [
                                        {
                                            "Name": "r",
                                            "Properties": {
                                                "FilterType": "Sql",
                                                "SqlFilter": {"SqlExpression": "1=1"},
                                                "Action": {"SqlExpression": "SET stamped = 'yes'"},
                                            },
                                        }
                                    ],
                                }
                            ],
                        }
                    ],
                }
            ]
        }
    }

    async def run(conn: str) -> dict[str, Any]:
        async with AsyncClient.from_connection_string(conn) as c:
            async with c.get_topic_sender("t") as s:
                await s.send_messages(ServiceBusMessage("x"))
            async with c.get_subscription_receiver("t", "s", max_wait_time=5) as r:
                (m,) = await r.receive_messages(max_wait_time=5)
                await r.complete_message(m)
                return _props(m)

    with Emulator(topology) as emu:
        assert asyncio.run(run(emu.connection_string)) == {"stamped": "yes", "RuleName": "r"}


def test_an_action_setting_a_system_property_the_emulator_cannot_set_is_refused(
    admin: ServiceBusAdministrationClient,
) -> None:
    """Emulator limit (sys.PartitionKey, ForcePersistence, ScheduledEnqueueTimeUtc,
    ViaPartitionKey), and a property the broker sets: refused with the position, never ignored.
    sys.Label and the other properties-section fields are set (test_documented_rules.py)."""
    from azure.core.exceptions import HttpResponseError

    admin.create_topic("sysact")
    admin.create_subscription("sysact", "s")
    for action, said in [
        (
            "SET a = 1; SET sys.PartitionKey = 'x'",
            "setting sys.PartitionKey is not supported by the emulator at position 15",
        ),
        ("SET sys.SequenceNumber = 1", "sys.SequenceNumber is set by the broker and cannot be changed at position 4"),
    ]:
        with pytest.raises(HttpResponseError) as caught:
            admin.create_rule("sysact", "s", "r", filter=TrueRuleFilter(), action=SqlRuleAction(action))
        assert said in str(caught.value)
    admin.create_rule("sysact", "s", "r", filter=TrueRuleFilter(), action=SqlRuleAction("SET sys.Label = 'x'"))
