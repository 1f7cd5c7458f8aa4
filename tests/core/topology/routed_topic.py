"""A topic of 20 subscriptions and 50 rules (SQL filters with LIKE/ESCAPE, IN, EXISTS, IS NULL,
arithmetic, sys./user./bracketed/quoted names, parameters; correlation filters; SQL actions;
$Default, alone and beside others; a false filter) and 1,000 generated messages (system and user
properties of every type the SDK sends, some missing), for tests/core/topology/test_route.py."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from typing import Any

from azure.servicebus import ServiceBusMessage
from azure.servicebus.management import (
    CorrelationRuleFilter,
    FalseRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)

Rule = tuple[str, Any, str | None]  # (name, filter, action)
DEFAULT: Rule = ("$Default", TrueRuleFilter(), None)


def _sql(name: str, text: str, action: str | None = None, **parameters: Any) -> Rule:
    return (name, SqlRuleFilter(text, parameters={f"@{k}": v for k, v in parameters.items()} or None), action)


SUBSCRIPTIONS: dict[str, list[Rule]] = {
    "s01": [DEFAULT, ("never", FalseRuleFilter(), None)],
    "s02": [_sql("eu", "region = 'eu'"), _sql("us", "user.region = 'us'")],
    "s03": [_sql("eu-uk", "user.region IN ('eu', 'uk')"), _sql("refunds", "sys.Label = 'refund'")],
    "s04": [_sql("elsewhere", "region NOT IN ('eu', 'us')"), _sql("vip", "EXISTS(vip) AND vip = TRUE")],
    "s05": [
        _sql("orders", "sys.Label LIKE 'order%'"),
        _sql("eu-orders", "sys.Label LIKE 'order!_%' ESCAPE '!'", "SET user.tagged = 'eu-order'"),
    ],
    "s06": [
        _sql("dash", "code LIKE '_-%'"),
        _sql("percent", "code LIKE '%!%%' ESCAPE '!'"),
        _sql("not-a", "code NOT LIKE 'a%'"),
    ],
    "s07": [
        _sql("no-region", "region IS NULL"),
        _sql("no-label", "sys.Label IS NULL"),
        _sql("addressed", "sys.To IS NOT NULL AND priority > 5"),
    ],
    "s08": [
        _sql("double", "priority * 2 + 1 > 9"),
        _sql("remainder", "priority % 3 = -1"),
        _sql("half", "priority / 2 = -2"),
    ],
    "s09": [_sql("big", "big > 1000000"), _sql("sum", "big + priority < 0"), _sql("seven", "big = 7")],
    "s10": [
        _sql("dear", "price >= 50.5"),
        _sql("margin", "price - priority > 80"),
        _sql("by-zero", "price / 0 > 1"),
    ],
    "s11": [
        ("label", CorrelationRuleFilter(label="order"), None),
        ("props", CorrelationRuleFilter(properties={"region": "eu"}), None),
        ("ids", CorrelationRuleFilter(correlation_id="c1", to="t1"), None),
    ],
    "s12": [
        ("three", CorrelationRuleFilter(properties={"priority": 3}), None),
        ("json-vip", CorrelationRuleFilter(content_type="application/json", properties={"vip": True}), None),
    ],
    "s13": [_sql("senior", "[hr-id] > 10"), _sql("quoted", '"hr-id" = 3'), _sql("first", "[hr-id] IN (1, 2, 3)")],
    "s14": [
        _sql("placed-only", "EXISTS(placed) AND NOT EXISTS(ref)"),
        _sql("both", "ref IS NOT NULL AND code IS NOT NULL"),
        _sql("not-vip", "vip = FALSE"),
    ],
    "s15": [
        _sql("bump", "priority > 3", "SET priority = priority + 100; SET sys.Label = 'bumped'"),
        _sql("move", "region = 'us'", "REMOVE region; SET moved = 1"),
    ],
    "s16": [_sql("stamp", "1=1", "SET sys.CorrelationId = 'all'"), DEFAULT],
    "s17": [
        _sql("reply", "sys.ReplyTo = @reply", reply="r1"),
        _sql("band", "price > @floor AND priority < @cap", floor=10.5, cap=4),
    ],
    "s18": [
        _sql("neither", "NOT (region = 'eu' OR priority > 2)"),
        _sql("either", "(region = 'eu' OR region = 'us') AND NOT vip = TRUE"),
    ],
    "s19": [
        ("never", FalseRuleFilter(), None),
        _sql("ones", "sys.MessageId LIKE 'm1%'"),
        _sql("plain", "sys.ContentType = 'text/plain' AND code IN ('A-1', 'B_2')"),
    ],
    "s20": [
        _sql("negated", "- priority > 2"),
        _sql("sum", "price + 0.5 = priority"),
        _sql("upper", "region = 'EU'", "SET user.region = 'eu'"),
    ],
}


def make_topic(admin: ServiceBusAdministrationClient, topic: str) -> None:
    admin.create_topic(topic)
    for name, rules in SUBSCRIPTIONS.items():
        admin.create_subscription(topic, name)
        admin.delete_rule(topic, name, "$Default")
        for rule, flt, action in rules:
            options: dict[str, Any] = {"filter": flt}
            if action is not None:
                options["action"] = SqlRuleAction(action)
            admin.create_rule(topic, name, rule, **options)


EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _user(rnd: random.Random) -> dict[str, Any]:
    values: dict[str, Any] = {
        "region": rnd.choice(["eu", "us", "uk", "apac", "EU", "e%u"]),
        "priority": rnd.randint(-5, 10),  # int
        "big": rnd.choice([2**30, -(2**30), 7, 12]),  # int (the SDK sends no long: it refuses an int past 32 bits)
        "price": round(rnd.uniform(-10, 100), 2),  # double
        "vip": rnd.random() < 0.5,  # boolean
        "placed": EPOCH + dt.timedelta(milliseconds=rnd.randint(0, 10**9)),  # timestamp
        "ref": uuid.UUID(int=rnd.getrandbits(128)),  # uuid
        "code": rnd.choice(["A-1", "B_2", "C%3", "a-1", "zz"]),
        "hr-id": rnd.randint(0, 20),
    }
    return {k: v for k, v in values.items() if rnd.random() < 0.8}  # some missing


def messages(n: int = 1000, seed: int = 61) -> list[ServiceBusMessage]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        system = {
            "subject": rnd.choice(["order", "refund", "return", "order_eu", "ORDER", None]),
            "to": rnd.choice(["t1", "t2", None]),
            "reply_to": rnd.choice(["r1", "r2", None]),
            "correlation_id": rnd.choice(["c1", "c2", None]),
            "content_type": rnd.choice(["application/json", "text/plain", None]),
        }
        kwargs = {k: v for k, v in system.items() if v is not None}
        out.append(ServiceBusMessage(f"body {i}", message_id=f"m{i}", application_properties=_user(rnd), **kwargs))
    return out
