"""Microsoft's documented rules in the broker, through the SDK: a topic whose subscriptions carry
the cases of ``tests/sqlrules/documented.py`` (each citing its page and line) and the examples
page's own sample, messages sent with the SDK, what each subscription holds read with the SDK and
compared message by message (properties set by actions included) with what the evaluator says;
filters outside the grammar refused when the rule is made, through the administration API and
through Config.json."""

from __future__ import annotations

import datetime as dt

import pytest
from azure.core.exceptions import HttpResponseError
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import (
    CorrelationRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)

from sbnotebook.emulator import Emulator, TopologyError
from sbnotebook.sqlrules.correlation import CorrelationFilter
from sbnotebook.sqlrules.sqlaction import compile_action
from sbnotebook.sqlrules.sqlfilter import compile_filter
from tests.emulator.broker.routing import Expected, Sent, differences, peek_all, routing
from tests.helpers import subscription_with_one_rule
from tests.sqlrules.documented import CASES, REFUSED

pytestmark = pytest.mark.timeout(300)


def test_every_documented_case_routes_in_the_broker_as_on_the_page(
    admin: ServiceBusAdministrationClient, client: ServiceBusClient
) -> None:
    admin.create_topic("docs")
    subscriptions = {}
    for case in CASES:
        flt = SqlRuleFilter(case.sql, parameters=case.parameters or None)
        subscription_with_one_rule(admin, "docs", case.name, "r", filter=flt)
        subscriptions[case.name] = Expected([("r", compile_filter(case.sql, case.parameters), None)])
    messages = [
        Sent(f"{case.name}.{i}", props, case.system) for case in CASES for i, (props, _) in enumerate(case.messages)
    ]
    with client.get_topic_sender("docs") as sender:
        sender.send_messages([m.sdk() for m in messages])
    expected, got = routing(client, "docs", subscriptions, messages)
    # Every subscription holds exactly what the evaluator says, for every message of every case.
    assert differences(expected, got) == {}
    # And a case's own messages are there exactly when the page says TRUE.
    own = {key for key in got if key.split("/")[1].startswith(key.split("/")[0] + ".")}
    documented = {f"{c.name}/{c.name}.{i}" for c in CASES for i, (_, outcome) in enumerate(c.messages) if outcome}
    assert own == documented
    # The comparison can fail: a subscription missing one message it should hold.
    assert differences(expected, {k: v for k, v in got.items() if k != "delimited/delimited.0"}) != {}


def _orders() -> list[Sent]:
    """The examples page's .NET sample: 13 orders, "CorrelationId = order.Priority, Subject =
    order.Color", application properties color, quantity, priority (``new Order()`` has none set),
    some with a "source" for the filter page's parameter example."""
    rows = [
        (None, 0, None),
        ("blue", 5, "low"), ("red", 10, "high"), ("yellow", 5, "low"), ("blue", 10, "low"), ("blue", 5, "high"),
        ("blue", 10, "low"), ("red", 5, "low"), ("red", 10, "low"), ("red", 5, "low"), ("yellow", 10, "high"),
        ("yellow", 5, "low"), ("yellow", 10, "low"),
    ]  # fmt: skip
    out = []
    for i, (color, quantity, priority) in enumerate(rows):
        user = {"color": color, "quantity": quantity, "priority": priority} | ({"source": "orders"} if i % 3 else {})
        system = {k: v for k, v in {"CorrelationId": priority, "Label": color}.items() if v is not None}
        out.append(Sent(f"order-{i}", user, system))
    return out


RED_ACTION = "SET quantity = quantity / 2; REMOVE priority;SET sys.CorrelationId = 'low';"


def test_the_examples_pages_sample_with_its_actions(
    admin: ServiceBusAdministrationClient, client: ServiceBusClient
) -> None:
    """EXAMPLES, ".NET example for creating subscription filters": AllOrders (true filter),
    ColorBlueSize10Orders ("color='blue' AND quantity=10"), ColorRed ("user.color='red'" with the
    action "SET quantity = quantity / 2; REMOVE priority;SET sys.CorrelationId = 'low';"),
    HighPriorityRedOrders (correlation Subject "red", CorrelationId "high"); and FILTER's
    "filterActionRule" ("source = @stringParam", "SET source='routedOrders'")."""
    admin.create_topic("orders")
    add = subscription_with_one_rule
    add(admin, "orders", "AllOrders", "AllOrders", filter=TrueRuleFilter())
    add(
        admin,
        "orders",
        "ColorBlueSize10Orders",
        "BlueSize10Orders",
        filter=SqlRuleFilter("color='blue' AND quantity=10"),
    )
    add(
        admin,
        "orders",
        "ColorRed",
        "RedOrdersWithAction",
        filter=SqlRuleFilter("user.color='red'"),
        action=SqlRuleAction(RED_ACTION),
    )
    add(
        admin,
        "orders",
        "HighPriorityRedOrders",
        "HighPriorityRedOrders",
        filter=CorrelationRuleFilter(label="red", correlation_id="high"),
    )
    routed = SqlRuleFilter("source = @stringParam", parameters={"@stringParam": "orders"})
    add(admin, "orders", "Routed", "filterActionRule", filter=routed, action=SqlRuleAction("SET source='routedOrders'"))
    admin.create_rule("orders", "Routed", "$Default", filter=TrueRuleFilter())  # beside: one more plain copy
    subscriptions = {
        "AllOrders": Expected([("AllOrders", compile_filter("1=1"), None)]),
        "ColorBlueSize10Orders": Expected([("BlueSize10Orders", compile_filter("color='blue' AND quantity=10"), None)]),
        "ColorRed": Expected([("RedOrdersWithAction", compile_filter("user.color='red'"), compile_action(RED_ACTION))]),
        "HighPriorityRedOrders": Expected(
            [("HighPriorityRedOrders", CorrelationFilter({"Label": "red", "CorrelationId": "high"}), None)]
        ),
        "Routed": Expected(
            [
                (
                    "filterActionRule",
                    compile_filter("source = @p", {"@p": "orders"}),
                    compile_action("SET source='routedOrders'"),
                ),
                ("$Default", compile_filter("1=1"), None),
            ]
        ),
    }
    messages = _orders()
    with client.get_topic_sender("orders") as sender:
        sender.send_messages([m.sdk() for m in messages])
    expected, got = routing(client, "orders", subscriptions, messages)
    assert differences(expected, got) == {}
    # What the page's action does, by hand: the four red orders, quantity halved (C#'s integer
    # division), priority gone, CorrelationId "low", RuleName the rule's name.
    red = sorted((k, c) for k, copies in got.items() if k.startswith("ColorRed/") for c in copies)
    assert [(k, user, system["CorrelationId"]) for k, (user, system) in red] == [
        (
            "ColorRed/order-2",
            {"color": b"red", "quantity": 5, "source": b"orders", "RuleName": b"RedOrdersWithAction"},
            "low",
        ),
        (
            "ColorRed/order-7",
            {"color": b"red", "quantity": 2, "source": b"orders", "RuleName": b"RedOrdersWithAction"},
            "low",
        ),
        (
            "ColorRed/order-8",
            {"color": b"red", "quantity": 5, "source": b"orders", "RuleName": b"RedOrdersWithAction"},
            "low",
        ),
        ("ColorRed/order-9", {"color": b"red", "quantity": 2, "RuleName": b"RedOrdersWithAction"}, "low"),
    ]
    assert sorted(k for k in got if k.startswith("HighPriorityRedOrders/")) == ["HighPriorityRedOrders/order-2"]
    assert len([k for k in got if k.startswith("AllOrders/")]) == 13
    # The comparison can fail: a received copy whose action did not run.
    key = "ColorRed/order-2"
    unchanged = {**got, key: [({**got[key][0][0], "quantity": 10}, got[key][0][1])]}
    assert key in differences(expected, unchanged)


@pytest.mark.parametrize(("sql", "position", "reason"), REFUSED[:8])
def test_a_filter_outside_the_grammar_is_refused_by_the_administration_api(
    admin: ServiceBusAdministrationClient, sql: str, position: int, reason: str
) -> None:
    admin.create_topic("grammar")
    admin.create_subscription("grammar", "s")
    with pytest.raises(HttpResponseError) as caught:
        admin.create_rule("grammar", "s", "bad", filter=SqlRuleFilter(sql))
    assert reason in str(caught.value) and f"position {position}" in str(caught.value)
    assert [r.name for r in admin.list_rules("grammar", "s")] == ["$Default"]  # nothing made


def test_an_action_outside_the_grammar_is_refused_by_the_administration_api(
    admin: ServiceBusAdministrationClient,
) -> None:
    admin.create_topic("grammar")
    admin.create_subscription("grammar", "s")
    with pytest.raises(HttpResponseError, match="expected '=' at position 6"):
        admin.create_rule("grammar", "s", "bad", filter=TrueRuleFilter(), action=SqlRuleAction("SET a 1"))
    admin.create_rule(
        "grammar", "s", "good", filter=SqlRuleFilter('"a b" = 1'), action=SqlRuleAction("SET [a]]b] = p('x')")
    )


def _config(sql: str, action: str | None = None) -> dict[str, object]:
    rule: dict[str, object] = {"FilterType": "Sql", "SqlFilter": {"SqlExpression": sql}}
    if action is not None:
        rule["Action"] = {"SqlExpression": action}
    subscription = {"Name": "s", "Rules": [{"Name": "r", "Properties": rule}]}
    return {"UserConfig": {"Namespaces": [{"Name": "n", "Topics": [{"Name": "t", "Subscriptions": [subscription]}]}]}}


def test_a_rule_outside_the_grammar_in_config_json_stops_the_emulator_naming_it() -> None:
    where = "Topics[0].Subscriptions[0].Rules[0] (r)"
    with pytest.raises(TopologyError, match=r"Rules\[0\] \(r\): expected a value at position 8"):
        Emulator(_config("color = "))
    with pytest.raises(TopologyError, match=r"Rules\[0\] \(r\): expected '=' at position 6") as caught:
        Emulator(_config("1=1", "SET a 1"))
    assert where in str(caught.value)
    with Emulator(_config("[HR-EmployeeID] = 7", "SET sys.CorrelationId = 'x'")):
        pass  # the same file with rules inside the grammar starts


SET_SYSTEM = (
    "SET sys.MessageId = 'm2'; SET sys.Label = sys.Label + '!'; SET sys.To = 'to'; SET sys.ReplyTo = 'rt'; "
    "SET sys.ContentType = 'text/plain'; SET sys.ReplyToSessionId = 'rs'; SET sys.TimeToLive = @ttl; "
    "REMOVE sys.CorrelationId; SET sys.ReplyTo = 5"  # not text: changes nothing (docs/emulator.md)
)


def test_system_properties_read_and_set_through_the_broker(
    admin: ServiceBusAdministrationClient, client: ServiceBusClient
) -> None:
    """The sys. properties the broker sets, read by a filter at the topic; an action setting the
    sys. properties it can (the subscription's copy only: another subscription sees the original)."""
    when = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    admin.create_topic("system")
    read = (
        "sys.SequenceNumber >= 1 AND sys.EnqueuedTimeUtc > @when AND sys.Size > 0 AND sys.DeliveryCount = 0 "
        "AND sys.TimeToLive = @hour AND sys.ExpiresAtUtc > sys.EnqueuedTimeUtc AND sys.ScheduledEnqueueTimeUtc IS NULL "
        "AND sys.PartitionKey = 'pk' AND sys.SessionId = 'pk' AND sys.State = 'Active'"
    )
    hour = dt.timedelta(hours=1)
    wrong = SqlRuleFilter("sys.DeliveryCount = 1 OR sys.State = 'Scheduled' OR sys.Size < 1")
    subscription_with_one_rule(admin, "system", "wrong", "r", filter=wrong)
    subscription_with_one_rule(
        admin, "system", "read", "r", filter=SqlRuleFilter(read, parameters={"@when": when, "@hour": hour})
    )
    subscription_with_one_rule(
        admin,
        "system",
        "set",
        "s",
        filter=TrueRuleFilter(),
        action=SqlRuleAction(SET_SYSTEM, parameters={"@ttl": 2 * hour}),
    )
    with client.get_topic_sender("system") as sender:
        sender.send_messages(
            ServiceBusMessage(
                "m", subject="l", correlation_id="c", session_id="pk", partition_key="pk", time_to_live=hour
            )
        )
    (seen,) = peek_all(client, "system", "read")
    assert (seen.subject, seen.correlation_id, seen.to) == ("l", "c", None)  # the action's changes are not there
    assert peek_all(client, "system", "wrong") == []  # the check can fail: no such message
    (changed,) = peek_all(client, "system", "set")
    got = [
        getattr(changed, a)
        for a in (
            "message_id",
            "subject",
            "to",
            "reply_to",
            "content_type",
            "reply_to_session_id",
            "correlation_id",
            "session_id",
        )
    ]
    assert got == ["m2", "l!", "to", "rt", "text/plain", "rs", None, "pk"]
    assert changed.time_to_live == 2 * hour and changed.application_properties == {b"RuleName": b"s"}
