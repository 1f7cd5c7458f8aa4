"""Subscription rules: which topic messages a subscription receives (the SQL evaluator in
``sbnotebook/sqlrules/`` compiles each rule's filter and action once; ``sqlview.py`` shows it a message)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from ...sqlrules.lexer import SqlFilterError
from ...sqlrules.rule import RULE_NAME, admits, compile_rule
from ..topology import RuleConfig, parse_duration
from .model import StoredMessage
from .sqlvalues import to_sql
from .sqlview import UNSETTABLE, MessageView


def _typed_value(value: Any, xsd: str | None) -> Any:
    """A parameter as the evaluator compares it: one from AMQP's add-rule in the evaluator's types
    (``to_sql``); one the administration API gave as text with its XML Schema type (dateTime,
    duration) as a UTC datetime or a timedelta."""
    if not isinstance(value, str) or xsd not in ("dateTime", "duration"):
        return to_sql(value)
    if xsd == "dateTime":
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
    negative = value.startswith("-")
    span = dt.timedelta(seconds=parse_duration(value.removeprefix("-"), where="a duration parameter"))
    return -span if negative else span


def _parameters(values: dict[str, Any], config: RuleConfig, where: str) -> dict[str, Any]:
    """Parameters (or correlation properties: ``where`` "property") with the types the API gave."""
    return {k: _typed_value(v, config.xsd_types.get(f"{where}:{k}")) for k, v in values.items()}


class Rule:
    """A rule's filter and action, compiled when the rule is made (an expression outside the
    grammar is refused then, SqlFilterError, never evaluated as false)."""

    def __init__(self, config: RuleConfig) -> None:
        self.config = config
        self.name = config.name
        correlation = dict(config.correlation)
        if isinstance(correlation.get("Properties"), dict):
            correlation["Properties"] = _parameters(correlation["Properties"], config, "property")
        self.compiled = compile_rule(
            config.filter_type,
            config.sql_expression,
            correlation,
            _parameters(config.parameters, config, "filter"),
            config.action,
            _parameters(config.action_parameters, config, "action"),
        )
        action = self.compiled.action
        for name, pos in action.system_targets if action is not None else ():
            if name in UNSETTABLE:
                raise SqlFilterError(f"setting sys.{name} is not supported by the emulator", config.action or "", pos)

    @property
    def has_action(self) -> bool:
        return self.compiled.action is not None

    def matches(self, msg: StoredMessage) -> bool:
        return self.compiled.matches(MessageView(msg))

    def apply(self, msg: StoredMessage) -> None:
        """Run the rule's action on ``msg`` (a subscription's own copy) and name the rule on it,
        as Service Bus does with the ``RuleName`` property."""
        if self.has_action:
            view = MessageView(msg)
            self.compiled.apply(view)
            view.set_user(RULE_NAME, self.name)


DEFAULT_RULE = RuleConfig(name="$Default", filter_type="True", sql_expression="1=1")  # as Service Bus makes it


def admit(rules: list[Rule], msg: StoredMessage, number: Callable[[], int]) -> list[StoredMessage]:
    """A subscription's copies of a topic message, as Service Bus makes them (``sqlrules.rule.admits``:
    one for all matching rules without an action, plus one per matching rule with an action, applied,
    ``RuleName`` set). The first copy keeps the topic's sequence number; further copies take new ones
    (``number``)."""
    plain, acting = admits([(rule.name, rule.compiled) for rule in rules], MessageView(msg))
    by_name = {rule.name: rule for rule in rules}
    out: list[StoredMessage] = []
    if plain:
        out.append(msg.copy_for(msg.sequence_number, msg.enqueued_time))
    for name in acting:
        copy = msg.copy_for(number() if out else msg.sequence_number, msg.enqueued_time)
        by_name[name].apply(copy)
        out.append(copy)
    return out
