"""Typed parameters of a rule added over AMQP (``com.microsoft:add-rule``): the .NET and JS SDKs send a
DateTime as an AMQP timestamp, a TimeSpan as ``com.microsoft:timespan`` ticks, a decimal as decimal128
and a Guid as a uuid. The rule compares them as the same rule made through the administration API
does (a DateTime with a DateTime), never as the number or text they were flattened to."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal

from proton import Described, symbol, timestamp

from sbnotebook.emulator.amqp.rules import rule_from_amqp
from sbnotebook.emulator.broker.rules import Rule
from sbnotebook.emulator.broker.sqlvalues import EPOCH, TIMESPAN, decimal128_of
from sbnotebook.sqlrules.context import MessageProperties

WHEN = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def _rule(sql: str, parameters: dict[str, object], action: str | None = None) -> Rule:
    description: dict[str, object] = {"sql-filter": {"expression": sql, "parameters": parameters}}
    if action is not None:
        description["sql-rule-action"] = {"expression": action, "parameters": parameters}
    return Rule(rule_from_amqp("r", description))


def _matches(rule: Rule, user: dict[str, object]) -> bool:
    return rule.compiled.matches(MessageProperties(user))


def test_a_datetime_parameter_compares_as_a_datetime() -> None:
    rule = _rule("placed < @cutoff", {"@cutoff": timestamp((WHEN - EPOCH) // dt.timedelta(milliseconds=1))})
    assert _matches(rule, {"placed": WHEN - dt.timedelta(hours=1)})
    assert not _matches(rule, {"placed": WHEN + dt.timedelta(hours=1)})
    # Flattened to its milliseconds (as before), a DateTime beside a number is unknown: no match.
    flat = _rule("placed < @cutoff", {"@cutoff": int((WHEN - EPOCH) // dt.timedelta(milliseconds=1))})
    assert not _matches(flat, {"placed": WHEN - dt.timedelta(hours=1)})


def test_a_timespan_a_decimal_and_a_guid_keep_their_types() -> None:
    ticks = dt.timedelta(minutes=90) // dt.timedelta(microseconds=1) * 10
    span = _rule("waited > @span", {"@span": Described(symbol(TIMESPAN), ticks)})
    assert _matches(span, {"waited": dt.timedelta(hours=2)})
    assert not _matches(span, {"waited": dt.timedelta(hours=1)})
    price = _rule("price > @floor", {"@floor": decimal128_of(Decimal("9.5"))})
    assert _matches(price, {"price": 10}) and not _matches(price, {"price": 9})
    key = uuid.UUID("12345678-1234-5678-1234-567812345678")
    guid = _rule("id = @id", {"@id": key})
    assert _matches(guid, {"id": str(key)})


def test_the_rule_is_written_to_the_journal_as_json() -> None:
    ticks = dt.timedelta(minutes=5) // dt.timedelta(microseconds=1) * 10
    rule = _rule(
        "placed < @cutoff AND waited > @span",
        {"@cutoff": timestamp(1_000), "@span": Described(symbol(TIMESPAN), ticks)},
        action="SET seen = @cutoff",
    )
    json.dumps(rule.config.parameters)
    assert rule.config.xsd_types == {
        "filter:@cutoff": "dateTime",
        "filter:@span": "duration",
        "action:@cutoff": "dateTime",
        "action:@span": "duration",
    }
